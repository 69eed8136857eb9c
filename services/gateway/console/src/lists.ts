// Lists read one page at a time: the first when the page opens, the next when the user asks
// ("Load more", with the last page's nextCursor). The runs list then follows the
// organization's stream and applies its events to the rows it holds.

import { APIError, Throttle, aborted, follow, get, withQuery, type Page, type Run } from "./api";

// Model is what a page renders: start when it mounts, stop when it goes; changed() asks for a
// render.
export interface Model { start(): void; stop(): void }

// PagedList holds the pages of one list read so far.
export class PagedList<T> implements Model {
  items: T[] = [];
  next: string | null = null;
  loaded = false;
  loadingMore = false;
  err?: unknown; // the first page could not be read
  moreErr?: unknown; // a later page could not be read
  protected ctl = new AbortController();
  protected stopped = false;

  constructor(protected path: string, protected key: (x: T) => string, protected changed: () => void, protected limit = 50) {}

  start() {
    this.first();
  }

  stop() {
    this.stopped = true;
    this.ctl.abort();
  }

  // retry reads the first page again after it failed.
  retry() {
    this.err = undefined;
    this.changed();
    this.first();
  }

  protected async first() {
    try {
      const page = await get<Page<T>>(withQuery(this.path, { limit: this.limit }), this.ctl.signal);
      if (this.stopped) return;
      this.items = [];
      this.merge(page.items || [], 0);
      this.next = page.nextCursor;
      this.loaded = true;
      this.afterFirst();
    } catch (x) {
      if (aborted(x) || this.stopped) return;
      this.err = x;
    }
    this.changed();
  }

  protected afterFirst() {}

  // more reads the page after the last one held.
  async more() {
    if (!this.next || this.loadingMore) return;
    this.loadingMore = true;
    this.moreErr = undefined;
    this.changed();
    const sent = Date.now();
    try {
      const page = await get<Page<T>>(withQuery(this.path, { limit: this.limit, after: this.next }), this.ctl.signal);
      if (this.stopped) return;
      this.merge(page.items || [], sent);
      this.next = page.nextCursor;
    } catch (x) {
      if (aborted(x) || this.stopped) return;
      this.moreErr = x;
    }
    this.loadingMore = false;
    this.changed();
  }

  // merge puts items read from the API (a request sent at `sent`) in place of those held with
  // the same key, and adds the others at the end.
  protected merge(items: T[], _sent: number) {
    const at = new Map(this.items.map((x, i) => [this.key(x), i]));
    for (const x of items) {
      const i = at.get(this.key(x));
      if (i === undefined) {
        at.set(this.key(x), this.items.length);
        this.items.push(x);
      } else this.items[i] = x;
    }
  }

  // replace puts one item in place of the one held with its key.
  replace(x: T) {
    this.items = this.items.map((y) => (this.key(y) === this.key(x) ? x : y));
    this.changed();
  }

  // prepend puts an item the user just made at the top (lists are newest first).
  prepend(x: T) {
    this.items = [x, ...this.items.filter((y) => this.key(y) !== this.key(x))];
    this.loaded = true;
    this.changed();
  }

  // remove drops the item held with key k (the user deleted it).
  remove(k: string) {
    this.items = this.items.filter((y) => this.key(y) !== k);
    this.changed();
  }
}

// workflowNames holds the names of the workflows any page read, by id, for the pages that
// show a workflow by its name without reading it again (a run's page after the runs list).
// It lasts as long as the page: switching organization loads the console afresh.
export const workflowNames = new Map<string, string>();
export const rememberNames = (ws: { id: string; name: string }[]) => { for (const w of ws) workflowNames.set(w.id, w.name); };

// RunRow is a run of the list; pending marks one inserted from an event and not read yet
// (its createdAt is unknown).
export type RunRow = Run & { pending?: boolean };

export interface RunFilters { workflowId: string; status: string }

// RunsList is the organization's runs, newest first (by id: run ids are time-ordered, and the
// API lists them in that order), narrowed by filters, kept current by the
// organization's stream:
// - a status event of a run held updates its row;
// - an event of a run not held that matches the filters and is newer than the oldest run held
//   (or there is no older page) is a new row, inserted where its id sorts, from the event's
//   data; the run is read once by id (or, when several wait, the first page is read once) to
//   fill in what the event lacks, at most once per fillGap;
// - an event of an older run not held belongs to a page not read yet: "Load more" shows it.
// The stream is opened without the status filter so that a run leaving the filtered status
// still updates its row.
export class RunsList extends PagedList<RunRow> {
  private early: any[] = []; // events that came before the first page
  private unread = new Set<string>(); // rows from events, to be read
  private triedPage = false;
  private needPage = false;
  private eventAt = new Map<string, number>(); // when a run's last event was applied
  private fill: Throttle;
  private close?: () => void;
  streamErr?: unknown;

  static fillGap = 5_000;

  constructor(private filters: RunFilters, changed: () => void) {
    super(withQuery("/api/runs", filters as any), (r) => r.runId, changed);
    this.fill = new Throttle(() => this.fillIn(), RunsList.fillGap);
  }

  start() {
    this.close = follow(withQuery("/api/runs/events", { workflowId: this.filters.workflowId }), (name, d) => {
      if (name === "run.status") this.onStatus(d);
    }, {
      // The stream does not resume: what changed while it was cut is read from the first page.
      reopened: () => { this.needPage = true; this.fill.kick(); },
      failed: (x) => { this.streamErr = x; this.changed(); },
    });
    super.start();
  }

  stop() {
    super.stop();
    this.close?.();
    this.fill.stop();
  }

  protected afterFirst() {
    const early = this.early;
    this.early = [];
    for (const d of early) this.onStatus(d);
  }

  // merge keeps the rows sorted by id, newest first, and keeps a status an event brought after
  // the read was sent (the read may have seen an older one).
  protected merge(items: RunRow[], sent: number) {
    const byId = new Map(this.items.map((r) => [r.runId, r]));
    for (const r of items) {
      const old = byId.get(r.runId);
      if (old && (this.eventAt.get(r.runId) ?? 0) > sent) {
        byId.set(r.runId, { ...r, status: old.status, waiting: old.waiting, error: old.error, finishedAt: old.finishedAt ?? r.finishedAt });
      } else byId.set(r.runId, r);
      this.unread.delete(r.runId);
    }
    this.items = sortRuns([...byId.values()]);
  }

  private onStatus(d: any) {
    if (this.stopped || typeof d?.runId !== "string") return;
    if (!this.loaded) {
      this.early.push(d);
      return;
    }
    const { workflowId, status } = this.filters;
    const held = this.items.find((r) => r.runId === d.runId);
    this.eventAt.set(d.runId, Date.now());
    if (held) {
      const row: RunRow = { ...held, status: d.status, waiting: d.waiting ?? null, error: d.error ?? held.error, finishedAt: d.at ?? held.finishedAt };
      this.items = this.items.map((r) => (r.runId === d.runId ? row : r));
      this.changed();
      return;
    }
    if ((workflowId && d.workflowId !== workflowId) || (status && d.status !== status)) return;
    const oldest = this.items[this.items.length - 1];
    if (this.next && oldest && d.runId < oldest.runId) return; // on a page not read yet
    const row: RunRow = {
      runId: d.runId, workflowId: d.workflowId, workflowVersion: 0, status: d.status, input: undefined, output: undefined,
      error: d.error ?? null, waiting: d.waiting ?? null, createdAt: "", startedAt: null, finishedAt: d.at ?? null, pending: true,
    };
    this.items = sortRuns([...this.items, row]);
    this.unread.add(d.runId);
    this.triedPage = false;
    this.fill.kick();
    this.changed();
  }

  // fillIn reads what the events could not tell: the first page when it was cut away from the
  // stream or when more than two new rows wait, else the two newest waiting rows by id.
  private async fillIn() {
    if (this.stopped) return;
    const sent = Date.now();
    try {
      if (this.needPage || (this.unread.size > 2 && !this.triedPage)) {
        this.needPage = false;
        this.triedPage = true;
        const page = await get<Page<RunRow>>(withQuery(this.path, { limit: this.limit }), this.ctl.signal);
        if (this.stopped) return;
        this.merge(page.items || [], sent);
      } else {
        this.triedPage = false;
        const ids = [...this.unread].sort().reverse().slice(0, 2);
        await Promise.all(ids.map(async (id) => {
          try {
            const r = await get<RunRow>(`/api/runs/${encodeURIComponent(id)}`, this.ctl.signal);
            if (!this.stopped) this.merge([r], sent);
          } catch (x) {
            if (x instanceof APIError && x.status === 404) {
              this.unread.delete(id);
              this.items = this.items.filter((r) => r.runId !== id);
            } else throw x;
          }
        }));
      }
      this.moreErr = undefined;
    } catch (x) {
      if (aborted(x) || this.stopped) return;
      this.moreErr = x;
    }
    this.changed();
    if (this.unread.size) this.fill.kick();
  }
}

const sortRuns = (rows: RunRow[]) => rows.sort((a, b) => (a.runId < b.runId ? 1 : a.runId > b.runId ? -1 : 0));
