// RunFollower keeps one run's page current while spending few requests:
// - it reads the run and its logs once; a finished run never changes, and that is all;
// - otherwise it follows the run's stream (GET /api/runs/:id/events, resumed after the last
//   event when cut) and builds the attempts and the run's status from the events' data;
// - the logs (the attempts' inputs and outputs, which events do not carry) are read from the
//   last cursor held (?after=), so each read brings only the attempts that changed since, at
//   most once per logsGap while attempts finish, and once more when the run ends;
// - the run itself is read again only on a status event that brings something the event
//   lacks (its start time, its output at the end), coalesced.

import { Throttle, aborted, attemptOver, finished, follow, get, withQuery, type Attempt, type Page, type Run } from "./api";
import type { Model } from "./lists";

export class RunFollower implements Model {
  run?: Run;
  attempts: Attempt[] = [];
  err?: unknown; // the run could not be read: nothing to show
  bgErr?: unknown; // a later read failed: what is shown may lag
  private byId = new Map<string, Attempt>();
  private cursor: string | null = null;
  private over = false; // the stream sent the run's final status
  private statusAt = 0; // when the last status event was applied
  private ctl = new AbortController();
  private stopped = false;
  private close?: () => void;
  private logs: Throttle;
  private reread: Throttle;

  static logsGap = 10_000;
  static runGap = 5_000;
  static logsPage = 1000;

  constructor(private id: string, private changed: () => void) {
    this.logs = new Throttle(() => this.readLogs(), RunFollower.logsGap);
    this.reread = new Throttle(() => this.readRun(), RunFollower.runGap);
  }

  async start() {
    try {
      const [run] = await Promise.all([get<Run>(`/api/runs/${encodeURIComponent(this.id)}?include=workflow`, this.ctl.signal), this.readLogs(true)]);
      if (this.stopped) return;
      this.run = run;
    } catch (x) {
      if (aborted(x) || this.stopped) return;
      this.err = x;
      this.changed();
      return;
    }
    this.changed();
    if (finished(this.run.status)) return;
    // From the start: the replay is merged into what was read (nothing goes backwards), and
    // the logs cursor is not an event id.
    this.close = follow(`/api/runs/${encodeURIComponent(this.id)}/events`, (name, d) => this.apply(name, d), {
      resume: true,
      over: () => this.over,
      failed: (x) => { this.bgErr = x; this.changed(); },
    });
  }

  stop() {
    this.stopped = true;
    this.ctl.abort();
    this.close?.();
    this.logs.stop();
    this.reread.stop();
  }

  // wantDetails asks for the logs soon: the user opened an attempt whose input is not read yet.
  wantDetails() {
    this.logs.kick(true);
  }

  // refresh reads the run and the new logs soon (after the user acted on the run).
  refresh() {
    this.reread.kick(true);
    this.logs.kick(true);
  }

  private apply(name: string, d: any) {
    if (this.stopped || !this.run) return;
    if (name === "run.status") {
      const r = this.run;
      this.statusAt = Date.now();
      this.run = { ...r, status: d.status, waiting: d.waiting ?? null, queue: d.queue ?? null, error: d.error ?? r.error, finishedAt: d.at ?? r.finishedAt };
      if (finished(d.status)) {
        // The end: the output, and the last attempts' outputs.
        this.over = true;
        this.reread.kick(true);
        this.logs.kick(true);
      } else if (d.status !== "queued" && !r.startedAt) {
        this.reread.kick();
      }
    } else if (name === "run.queue") {
      // Why the queued run waits for a worker (sent while it waits, when it changes).
      if (this.run.status !== "queued") return;
      this.run = { ...this.run, queue: d.queue ?? null };
    } else if (name === "attempt.started" || name === "attempt.finished") {
      const a: Attempt = {
        id: d.attemptId, block_id: d.block_id, type: d.type, attempt: d.attempt, status: d.status,
        startedAt: d.startedAt, finishedAt: d.finishedAt ?? null, durationMs: d.durationMs ?? null, error: d.error ?? null,
      };
      // An end the logs already showed (the stream replays the run from its start) needs no
      // read; a new one has an output to read.
      const known = this.byId.get(a.id);
      const fresh = !(known && attemptOver(known.status) && "output" in known);
      this.merge(a);
      this.sort();
      if (name === "attempt.finished" && fresh) this.logs.kick();
    } else return;
    this.changed();
  }

  // merge takes in an attempt's newer state; an attempt that ended never runs again, so a
  // replayed start does not undo its end, and the input and output read stay.
  private merge(a: Attempt) {
    const old = this.byId.get(a.id);
    let m: Attempt;
    if (!old) m = a;
    else if (attemptOver(old.status) && !attemptOver(a.status)) m = { ...old, input: old.input ?? a.input, output: old.output ?? a.output };
    else m = { ...old, ...a, input: "input" in a ? a.input : old.input, output: "output" in a ? a.output : old.output };
    this.byId.set(a.id, m);
  }

  private sort() {
    this.attempts = [...this.byId.values()].sort((x, y) => Date.parse(x.startedAt) - Date.parse(y.startedAt));
  }

  // readLogs reads the attempts changed since the cursor held (all of them the first time).
  private async readLogs(first = false) {
    try {
      for (let i = 0; i < 20; i++) {
        const page = await get<Page<Attempt>>(
          withQuery(`/api/runs/${encodeURIComponent(this.id)}/logs`, { limit: RunFollower.logsPage, after: this.cursor }), this.ctl.signal);
        if (this.stopped) return;
        for (const a of page.items || []) this.merge(a);
        if (page.nextCursor) this.cursor = page.nextCursor;
        // A page also stops at a byte budget (1 MiB), so a short page is not always the end:
        // the first read goes on until an empty page and loads every attempt; a later read
        // (one per burst of events) stops at a short page, and the next event's read goes on
        // from its cursor.
        const n = (page.items || []).length;
        if (n === 0 || (!first && n < RunFollower.logsPage)) break;
      }
      this.sort();
      if (!first) this.bgErr = undefined;
    } catch (x) {
      if (first) throw x;
      if (aborted(x) || this.stopped) return;
      this.bgErr = x;
    }
    if (!first) this.changed();
  }

  // readRun reads the run again; a status that an event brought after the read was sent stays.
  private async readRun() {
    const sent = Date.now();
    try {
      const r = await get<Run>(`/api/runs/${encodeURIComponent(this.id)}`, this.ctl.signal);
      if (this.stopped || !this.run) return;
      const cur = this.run;
      this.run = this.statusAt > sent
        ? { ...r, workflow: cur.workflow, status: cur.status, waiting: cur.waiting, error: cur.error }
        : { ...r, workflow: cur.workflow };
      this.bgErr = undefined;
    } catch (x) {
      if (aborted(x) || this.stopped) return;
      this.bgErr = x;
    }
    this.changed();
  }
}
