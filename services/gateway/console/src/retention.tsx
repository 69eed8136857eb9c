// Run retention (docs/RETENTION.md): how long the organization's finished runs are kept. The
// organization's settings page shows it and lets owners and admins set a shorter period; a
// run's page says it, and when a finished run goes.
import { useEffect, useState } from "preact/hooks";
import { APIError, backgroundDelay, call, get, sleep } from "./api";
import { A, ErrorBox, fieldErrors, when, words } from "./ui";

// Retention is GET /api/organizations/{orgId}/retention's answer.
export interface Retention {
  organizationId: string;
  runRetention: string | null; // the organization's own period ("168h"), null: the server's
  serverRetention: string; // SVC_RUN_RETENTION, the longest allowed
  effectiveRetention: string; // the one applied
  effectiveRetentionSeconds: number;
  updatedAt: string | null; // when the organization last set its own
}

const PATH = "/api/organizations/current/retention";

// The retention changes rarely, and each read takes a rate-limit token: the run pages of one
// visit share a reading for a few minutes. The settings page reads afresh and, after a change,
// leaves the answer here. Switching organizations loads the console again, which empties it.
const KEEP_MS = 5 * 60_000;
let known: { at: number; p: Promise<Retention> } | null = null;
const fresh = () => !!known && Date.now() - known.at < KEEP_MS;

export function readRetention(again = false): Promise<Retention> {
  if (!again && fresh()) return known!.p;
  const p = get<Retention>(PATH);
  known = { at: Date.now(), p };
  // A failed read is not kept: the next page asks again.
  p.catch(() => { if (known?.p === p) known = null; });
  return p;
}

function remember(r: Retention) {
  known = { at: Date.now(), p: Promise.resolve(r) };
}

// forgetRetention drops the reading: the session ended, the next may be another organization's.
export function forgetRetention() {
  known = null;
}

// --- periods in words

// seconds reads a period as the API writes it: Go's units without zeros ("720h", "1h30m",
// "90s"; the API answers no other). NaN for anything else.
export function seconds(period: string): number {
  const parts = period.match(/\d+(?:\.\d+)?(?:h|m|s)/g);
  if (!parts || parts.join("") !== period) return NaN;
  const unit: Record<string, number> = { h: 3600, m: 60, s: 1 };
  return parts.reduce((sum, p) => sum + parseFloat(p) * unit[p.slice(-1)], 0);
}

const plural = (n: number, one: string) => `${n} ${one}${n === 1 ? "" : "s"}`;

// spell says a period in the largest unit that divides it: "30 days", "36 hours", "90 minutes".
export function spell(s: number): string {
  if (!Number.isFinite(s) || s <= 0) return "no time";
  if (s % 86400 === 0) return plural(s / 86400, "day");
  if (s % 3600 === 0) return plural(s / 3600, "hour");
  if (s % 60 === 0) return plural(s / 60, "minute");
  return plural(Math.round(s), "second");
}

// ownApplies reports whether the organization's own period is the one applied (it may have set one
// the operator later made longer than the server's, which then applies instead).
const ownApplies = (r: Retention) => r.runRetention !== null && r.effectiveRetention === r.runRetention && r.runRetention !== r.serverRetention;

// whose names the period applied, as the run page says it.
const whose = (r: Retention) => (ownApplies(r) ? "this organization's retention" : "the server's retention");

// --- the run page

// RunRetention says how long finished runs are kept and, for a finished run, when it is
// deleted (finishedAt + the period; the sweep takes it within about a minute after). Nothing
// shows while the retention is unknown or could not be read: the run is what the page is for.
// It is a read the user did not ask for: while the bucket runs low it waits (backgroundDelay).
export function RunRetention({ finishedAt }: { finishedAt: string | null }) {
  const [r, setR] = useState<Retention | null>(null);
  useEffect(() => {
    const ctl = new AbortController();
    sleep(fresh() ? 0 : backgroundDelay(), ctl.signal).then(() => readRetention())
      .then((x) => { if (!ctl.signal.aborted) setR(x); }, () => {});
    return () => ctl.abort();
  }, []);
  if (!r) return null;
  const kept = spell(r.effectiveRetentionSeconds);
  let end: null | { iso: string; past: boolean } = null;
  if (finishedAt) {
    const t = Date.parse(finishedAt) + r.effectiveRetentionSeconds * 1000;
    end = { iso: new Date(t).toISOString(), past: t <= Date.now() };
  }
  return (
    <p class="meta" data-testid="run-retention">
      Finished runs are kept for {kept} (<A href="/organization">{whose(r)}</A>).
      {end && (end.past
        ? <> This run is past its retention: it is deleted at the next sweep.</>
        : <> This run will be deleted after <time dateTime={end.iso} data-testid="deleted-at">{when(end.iso)}</time>.</>)}
    </p>
  );
}

// --- the settings page

// fieldMessage is what the period field shows for err: the API's word on runRetention (its
// own name put as a person says it), the 403 of a member, or null for anything else (shown
// below the form instead).
function fieldMessage(err: unknown): string | null {
  if (!(err instanceof APIError)) return null;
  if (err.status === 403 && err.code === "forbidden") return "Only owners and admins of this organization may change the retention period.";
  const f = fieldErrors(err).find((x) => x.path === "/runRetention");
  if (f) return words(f.message.replace(/^runRetention\b/, "The period"));
  return null;
}

// RetentionSettings shows the organization's retention; owners and admins (mayChange) may set
// a shorter period or go back to the server's. mayChange is undefined while the role is read
// (neither the form nor the read-only note shows yet), null when it could not be: the form
// shows, and the API's 403 turns it read-only.
export function RetentionSettings({ mayChange, role }: { mayChange: boolean | null | undefined; role: string | null }) {
  const [r, setR] = useState<Retention | null>(null);
  const [loadErr, setLoadErr] = useState<unknown>();
  const [period, setPeriod] = useState("");
  const [err, setErr] = useState<unknown>();
  const [note, setNote] = useState("");
  const [busy, setBusy] = useState(false);
  const [refused, setRefused] = useState(false); // a 403: this caller may not change it
  const load = () => {
    setLoadErr(undefined);
    readRetention(true).then(setR, setLoadErr);
  };
  useEffect(load, []);

  const send = async (runRetention: string | null) => {
    setErr(undefined);
    setNote("");
    setBusy(true);
    try {
      const x = await call<Retention>("PUT", PATH, { runRetention });
      remember(x);
      setR(x);
      setPeriod("");
      setNote(runRetention === null
        ? `Back to the server's period: finished runs are kept for ${spell(x.effectiveRetentionSeconds)}.`
        : `Saved: finished runs are kept for ${spell(x.effectiveRetentionSeconds)}.`);
    } catch (x) {
      if (x instanceof APIError && x.status === 403 && x.code === "forbidden") setRefused(true);
      setErr(x);
    }
    setBusy(false);
  };
  const save = (e: Event) => {
    e.preventDefault();
    send(period.trim());
  };

  if (loadErr) return <section class="card retention" aria-labelledby="retention-title"><h2 id="retention-title">Run retention</h2><ErrorBox err={loadErr} /><button onClick={load}>Try again</button></section>;
  const server = r ? spell(seconds(r.serverRetention)) : "";
  const own = r?.runRetention ?? null;
  const readOnly = mayChange === false || refused;
  const onField = fieldMessage(err);
  const describedBy = ["retention-hint", ...(onField ? ["retention-error"] : [])].join(" ");
  return (
    <section class="card retention" aria-labelledby="retention-title" data-testid="retention">
      <h2 id="retention-title">Run retention</h2>
      <p>Finished runs (completed, failed or cancelled) are deleted, with their attempts and logs, once they are older than the period in effect, counted from when they finished. Runs still queued, running or waiting are never deleted.</p>
      {!r ? <p>Loading…</p> : (
        <dl class="facts">
          <dt>In effect</dt>
          <dd data-testid="retention-effective">{spell(r.effectiveRetentionSeconds)} <small class="hint">({ownApplies(r) ? "this organization's period" : "the server's period"})</small></dd>
          <dt>Server's maximum</dt>
          <dd data-testid="retention-server">{server} <code>{r.serverRetention}</code></dd>
          <dt>This organization's own</dt>
          <dd data-testid="retention-own">
            {own === null ? "None: the server's period applies."
              : <>{spell(seconds(own))} <code>{own}</code>{r.updatedAt && <>, set {when(r.updatedAt)}</>}{!ownApplies(r) && <>. It is not shorter than the server's period, so the server's applies.</>}</>}
          </dd>
        </dl>
      )}
      {r && mayChange !== undefined && (readOnly ? (
        <p class="note" data-testid="retention-readonly">
          {refused ? fieldMessage(err) : "Only owners and admins of this organization may change the retention period."}
          {role && <> You are {role === "admin" || role === "owner" ? `an ${role}` : `a ${role}`} of it.</>}
        </p>
      ) : (
        <form class="retention-form" onSubmit={save}>
          <label for="retention-period">Keep finished runs for</label>
          <div class="inline">
            <input id="retention-period" value={period} required autocomplete="off" spellcheck={false} placeholder="7d"
              aria-invalid={onField ? "true" : undefined} aria-describedby={describedBy}
              onInput={(e) => { setPeriod((e.target as HTMLInputElement).value); setErr(undefined); }} />
            <button type="submit" disabled={busy}>Save</button>
            <button type="button" class="secondary" disabled={busy || own === null} onClick={() => send(null)}>Use the server's period</button>
          </div>
          <small class="hint" id="retention-hint">Whole days (<code>7d</code>), hours (<code>36h</code>), minutes (<code>90m</code>) or a mix (<code>1h30m</code>), from 1 minute up to the server's {server}. A change applies from the next sweep, within about a minute.</small>
          {onField && <p class="field-error" id="retention-error" role="alert">{onField}</p>}
        </form>
      ))}
      {note && <p class="note" role="status">{note}</p>}
      {err && !onField ? <ErrorBox err={err} /> : null}
    </section>
  );
}
