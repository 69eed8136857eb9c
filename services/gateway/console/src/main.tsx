import { render } from "preact";
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { APIError, attemptOver, call, finished, get, onRateLimit, post, withQuery, type Attempt, type RateNotice, type Run, type Schedule, type Workflow } from "./api";
import { Docs } from "./docs";
import { RunFollower } from "./follower";
import { Graph } from "./graph";
import { PagedList, RunsList, rememberNames, workflowNames } from "./lists";
import { A, ErrorBox, Failed, Json, More, NotFound, PageError, Status, describeError, navigate, parseJSON, useLoad, useModel, usePath, when, words } from "./ui";
import { RetentionSettings, RunRetention, forgetRetention } from "./retention";
import { NewWorkflow, WorkflowPage } from "./workflow";
import "./style.css";

// RateLimited shows a request waiting out a 429: the API's error code and message, and when it
// is sent again.
function RateLimited() {
  const [n, setN] = useState<RateNotice | null>(null);
  const [, tick] = useState(0);
  useEffect(() => onRateLimit(setN), []);
  useEffect(() => {
    if (!n) return;
    const t = setInterval(() => tick((x) => x + 1), 1000);
    return () => clearInterval(t);
  }, [n]);
  if (!n) return null;
  // The streams' ceiling says what to do (close one); the rate limit's own message is about
  // principals and milliseconds: it stays in the title.
  const text = /stream/.test(n.message) ? words(n.message) : "Too many requests in a short time: the console waits before it asks again.";
  return (
    <p class="error" role="alert" data-testid="rate-limited" data-code={n.code} title={`${n.code}: ${n.message}`}>
      {text} Retrying in {Math.max(1, Math.ceil((n.until - Date.now()) / 1000))} s.
    </p>
  );
}

// --- auth
function SignIn({ up, onDone }: { up: boolean; onDone: () => void }) {
  const [err, setErr] = useState<unknown>();
  const submit = async (e: Event) => {
    e.preventDefault();
    const f = new FormData(e.target as HTMLFormElement);
    setErr(undefined);
    try {
      const body: any = { email: f.get("email"), password: f.get("password") };
      if (up) body.name = f.get("name") || undefined;
      await post(up ? "/api/auth/sign-up/email" : "/api/auth/sign-in/email", body);
      onDone();
    } catch (x) {
      setErr(x);
    }
  };
  return (
    <main class="auth">
      <h1>svc</h1>
      <form onSubmit={submit} aria-labelledby="auth-title">
        <h2 id="auth-title">{up ? "Create an account" : "Sign in"}</h2>
        {up && <label>Name <input name="name" autocomplete="name" /></label>}
        <label>Email <input name="email" type="email" required autocomplete="email" /></label>
        <label>Password <input name="password" type="password" required minLength={8} autocomplete={up ? "new-password" : "current-password"} /></label>
        <ErrorBox err={err} />
        <button type="submit">{up ? "Sign up" : "Sign in"}</button>
        <p>{up ? <>Have an account? <A href="/signin">Sign in</A></> : <>New here? <A href="/signup">Create an account</A></>}</p>
      </form>
      <p class="hint">Working with the API? The <A href="/docs">API reference</A> is open, no account needed.</p>
    </main>
  );
}

// sectionOf is the list a path belongs to, without its query: what stays meaningful in another
// organization (a run, a workflow or a workflowId filter of this one would be not_found there).
const sectionOf = (path: string) => {
  const seg = path.split("?")[0].split("/").filter(Boolean)[0];
  return ["workflows", "runs", "schedules", "keys", "organization"].includes(seg) ? `/${seg}` : "/workflows";
};

// openOrganization makes id the session's active organization and loads the console again in
// it (every list and stream of the page belongs to the organization left).
async function openOrganization(id: string) {
  await post("/api/auth/organization/set-active", { organizationId: id });
  location.assign(sectionOf(location.pathname));
}

// ChooseOrganization stands in for every page while the session has no active organization:
// a user of several organizations signs in with none chosen, and every domain read would answer
// no_active_organization. A user of none is offered to create one.
function ChooseOrganization({ orgs }: { orgs: any[] }) {
  const [err, setErr] = useState<unknown>();
  const create = async (e: Event) => {
    e.preventDefault();
    const name = String(new FormData(e.target as HTMLFormElement).get("name") || "").trim();
    setErr(undefined);
    try {
      // A slug must be unique across the system: the name's, with a short random tail.
      const base = name.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "") || "org";
      // Not guessable: a slug someone can predict is a slug someone else can take first.
      const tail = Array.from(crypto.getRandomValues(new Uint8Array(4)), (b) => "abcdefghijklmnopqrstuvwxyz0123456789"[b % 36]).join("");
      const o = await post<any>("/api/auth/organization/create", { name, slug: `${base.slice(0, 40)}-${tail}` });
      await openOrganization(o.id);
    } catch (x) { setErr(x); }
  };
  return (
    <section data-testid="choose-organization">
      <h1>Choose an organization</h1>
      {orgs.length > 0 ? (
        <>
          <p class="empty">You belong to {orgs.length === 1 ? "one organization" : `${orgs.length} organizations`} and this session has none open: choose the one to work in. The menu at the top switches later.</p>
          <ul class="orgs">
            {orgs.map((o) => <li key={o.id}><button onClick={() => openOrganization(o.id).catch(setErr)}>{o.name}</button> <small><code>{o.slug}</code></small></li>)}
          </ul>
        </>
      ) : (
        <>
          <p class="empty">You belong to no organization. Create one to hold your workflows, runs and keys.</p>
          <form class="inline" onSubmit={create}><input name="name" aria-label="Organization name" placeholder="organization name" required /><button type="submit">Create organization</button></form>
        </>
      )}
      <ErrorBox err={err} />
    </section>
  );
}

// Shell is the signed-in frame: the navigation, the organization menu, the rate-limit notice.
// A page that belongs to no organization (the API reference) sets anyOrg and shows even while
// none is open.
function Shell({ session, onSignOut, anyOrg, children }: any) {
  const orgs = useLoad(() => get<any[]>("/api/auth/organization/list"), []);
  const [err, setErr] = useState<unknown>();
  const active = session?.session?.activeOrganizationId;
  const switchOrg = async (id: string) => {
    if (!id) return;
    try { await openOrganization(id); } catch (x) { setErr(x); }
  };
  return (
    <div class="shell">
      <nav aria-label="Main">
        <strong>svc</strong>
        <A href="/workflows">Workflows</A>
        <A href="/runs">Runs</A>
        <A href="/schedules">Schedules</A>
        <A href="/keys">API keys</A>
        <A href="/organization">Settings</A>
        <A href="/docs">API reference</A>
        <span class="grow" />
        <select aria-label="Organization" value={active ?? ""} onChange={(e) => switchOrg((e.target as HTMLSelectElement).value)}>
          {!active && <option value="">(no organization)</option>}
          {(orgs.data || []).map((o) => <option value={o.id} key={o.id}>{o.name}</option>)}
        </select>
        <span class="who" title={session?.user?.email}>{session?.user?.email}</span>
        <button class="link" onClick={async () => { try { await post("/api/auth/sign-out"); } finally { onSignOut(); } }}>Sign out</button>
      </nav>
      <ErrorBox err={err || orgs.err} />
      <RateLimited />
      <main>{active || anyOrg ? children : orgs.data ? <ChooseOrganization orgs={orgs.data} /> : !orgs.err && <p>Loading…</p>}</main>
    </div>
  );
}

// --- workflows
const WF_ID = /^wf_[0-9a-z]{26}$/;

// Workflows lists the organization's workflows a page at a time. The API has no search, so the
// search box filters the workflows loaded, and says so while more pages remain; an id typed in
// full opens that workflow.
function Workflows() {
  const list = useModel((changed) => new PagedList<Workflow>("/api/workflows", (w) => w.id, changed), []);
  rememberNames(list.items);
  const [q, setQ] = useState("");
  const needle = q.trim().toLowerCase();
  const shown = list.items.filter((w) => !needle || w.name.toLowerCase().includes(needle) || w.id.includes(needle));
  return (
    <section>
      <h1>Workflows</h1>
      <p><A href="/workflows/new" class="button">New workflow</A></p>
      <input type="search" aria-label="Search workflows" placeholder="Search by name or id" value={q} onInput={(e) => setQ((e.target as HTMLInputElement).value)} />
      {needle && list.next && <small class="hint"> Searching the {list.items.length} workflows loaded: load more to search further.</small>}
      <Failed list={list} />
      {!list.loaded && !list.err && <p>Loading…</p>}
      {list.loaded && list.items.length === 0 && <p class="empty">No workflows yet. <A href="/workflows/new">Create one here</A> and build it block by block, or send a definition with <code>svc workflows create --name hello -f definition.json</code> or <code>POST /api/workflows</code>.</p>}
      {list.items.length > 0 && shown.length === 0 && (
        <p class="empty">No workflow{list.next ? " loaded" : ""} matches “{q}”.{WF_ID.test(needle) && <> <A href={`/workflows/${needle}`}>Open {needle}</A></>}</p>
      )}
      {shown.length > 0 && (
        <div class="table-scroll">
          <table>
            <thead><tr><th scope="col">Name</th><th scope="col">Id</th><th scope="col">Version</th><th scope="col">Updated</th></tr></thead>
            <tbody>
              {shown.map((w) => (
                <tr key={w.id}><td><A href={`/workflows/${w.id}`}>{w.name}</A></td><td><code>{w.id}</code></td><td>v{w.version}</td><td>{when(w.updatedAt)}</td></tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <More list={list} what="workflows" />
    </section>
  );
}

// --- runs
const STATUSES = ["queued", "running", "waiting", "completed", "failed", "cancelled"];

// Runs lists the organization's runs a page at a time, kept current by the organization's
// stream (lists.ts). Workflow names come from one page of workflows; a run of a workflow not on
// it shows the workflow's id.
function Runs({ query }: { query: URLSearchParams }) {
  const workflowId = query.get("workflowId") || "", status = query.get("status") || "";
  const runs = useModel((changed) => new RunsList({ workflowId, status }, changed), [workflowId, status]);
  const wfs = useModel((changed) => new PagedList<Workflow>("/api/workflows", (w) => w.id, changed, 500), []);
  const setFilter = (k: string, v: string) => {
    const n = new URLSearchParams();
    if (workflowId) n.set("workflowId", workflowId);
    if (status) n.set("status", status);
    v ? n.set(k, v) : n.delete(k);
    navigate(`/runs${n.toString() ? "?" + n : ""}`);
  };
  rememberNames(wfs.items);
  const names = new Map(wfs.items.map((w) => [w.id, w.name]));
  return (
    <section>
      <h1>Runs</h1>
      <div class="filters">
        <select aria-label="Status" value={status} onChange={(e) => setFilter("status", (e.target as HTMLSelectElement).value)}>
          <option value="">any status</option>
          {STATUSES.map((s) => <option key={s}>{s}</option>)}
        </select>
        <select aria-label="Workflow" value={workflowId} onChange={(e) => setFilter("workflowId", (e.target as HTMLSelectElement).value)}>
          <option value="">any workflow</option>
          {workflowId && !names.has(workflowId) && <option value={workflowId}>{workflowId}</option>}
          {wfs.items.map((w) => <option key={w.id} value={w.id}>{w.name}</option>)}
        </select>
      </div>
      <Failed list={runs} />
      <ErrorBox err={runs.streamErr} />
      {!runs.loaded && !runs.err && <p>Loading…</p>}
      {runs.loaded && runs.items.length === 0 && (status || workflowId
        ? <p class="empty">No runs match these filters. Change them, or <A href="/runs">show every run</A>.</p>
        : <p class="empty">No runs yet. Open a workflow and press “Start run”, or use <code>svc run &lt;workflow-id&gt;</code>.</p>)}
      {runs.items.length > 0 && (
        <div class="table-scroll">
          <table>
            <thead><tr><th scope="col">Run</th><th scope="col">Workflow</th><th scope="col">Status</th><th scope="col">Created</th></tr></thead>
            <tbody>
              {runs.items.map((r) => (
                <tr key={r.runId} data-run={r.runId}>
                  <td><A href={`/runs/${r.runId}`}><code>{r.runId}</code></A></td>
                  <td>{names.get(r.workflowId) || r.workflowId}</td>
                  <td><Status s={r.status} /></td>
                  <td>{when(r.createdAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <More list={runs} what="runs" />
    </section>
  );
}

// duration says a length of time in the unit that suits it.
const duration = (ms: number) => (ms < 1000 ? `${ms} ms` : ms < 120_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 60_000)} min`);

function Timeline({ run, attempts, now }: { run: Run; attempts: Attempt[]; now: number }) {
  const t0 = Date.parse(run.startedAt || run.createdAt);
  const end = (a: Attempt) => (a.finishedAt ? Date.parse(a.finishedAt) : now);
  const t1 = Math.max(t0 + 1, ...attempts.map(end), run.finishedAt ? Date.parse(run.finishedAt) : now);
  const total = t1 - t0;
  const blocks = [...new Set(attempts.map((a) => a.block_id))];
  if (attempts.length === 0) return <p class="empty">No attempts yet: the run is {run.status}.</p>;
  return (
    <div class="timeline" data-testid="timeline">
      {blocks.map((b) => (
        <div class="lane" key={b}>
          <span class="lane-name">{b}</span>
          <div class="lane-track">
            {attempts.filter((a) => a.block_id === b).map((a) => {
              const s = Date.parse(a.startedAt);
              // A bar stays inside its track: at least 18 px wide (its label), at most the
              // track, and moved left when it would pass the right end.
              const width = Math.min(100, Math.max(0.6, ((end(a) - s) / total) * 100));
              const left = Math.min(Math.max(0, ((s - t0) / total) * 100), 100 - width);
              const w = `max(${width.toFixed(3)}%, 18px)`;
              const wait = a.type === "wait" && a.status === "running", label = wait ? "waiting" : `#${a.attempt}`;
              return (
                <a href={`#${a.id}`} key={a.id} class={`bar b-${a.status}${a.type === "wait" ? " wait" : ""}`} data-attempt={a.id} data-status={a.status}
                  style={{ left: `max(0px, min(${left.toFixed(3)}%, calc(100% - ${w})))`, width: `min(100%, ${w})` }}
                  title={`${a.block_id} #${a.attempt} ${a.status} ${a.durationMs ?? "…"} ms`} aria-label={`${a.block_id} ${label}: ${a.status}`}>
                  {label}
                </a>
              );
            })}
          </div>
        </div>
      ))}
      <div class="axis"><span>0</span><span>{duration(total)}</span></div>
    </div>
  );
}

// useWorkflowName is a workflow's name: from what a list read already, else read once; ""
// while unknown (and for a workflow deleted since: the page shows its id).
function useWorkflowName(id?: string): string {
  const [name, setName] = useState(() => (id && workflowNames.get(id)) || "");
  useEffect(() => {
    if (!id) return;
    const known = workflowNames.get(id);
    if (known) { setName(known); return; }
    const ctl = new AbortController();
    get<Workflow>(`/api/workflows/${encodeURIComponent(id)}`, ctl.signal).then((w) => {
      workflowNames.set(w.id, w.name);
      setName(w.name);
    }, () => {});
    return () => ctl.abort();
  }, [id]);
  return name;
}

// RunPage shows one run, kept current by its event stream (follower.ts).
function RunPage({ id }: { id: string }) {
  const f = useModel((changed) => new RunFollower(id, changed), [id]);
  const [actErr, setActErr] = useState<unknown>();
  const [note, setNote] = useState("");
  const [signal, setSignal] = useState("");
  const [payload, setPayload] = useState("");
  const run = f.run, attempts = f.attempts, err = f.err, now = Date.now();
  const waitsFor = run?.waiting?.kind === "signal" ? run.waiting.signal || "" : "";
  useEffect(() => { if (waitsFor) setSignal((s) => s || waitsFor); }, [waitsFor]);
  // While an attempt runs (a wait included), its bar grows with the clock: the page draws
  // itself again every second, with no request.
  const [, tick] = useState(0);
  const running = !!run && !finished(run.status) && attempts.some((a) => !attemptOver(a.status));
  useEffect(() => {
    if (!running) return;
    const t = setInterval(() => tick((x) => x + 1), 1000);
    return () => clearInterval(t);
  }, [running]);
  const wfName = useWorkflowName(run?.workflowId);
  if (err) return <PageError err={err} what={`There is no run ${id} in your organization.`} back="/runs" backLabel="Back to the runs" />;
  if (!run) return <p>Loading…</p>;
  const cancel = async () => {
    if (!confirm(`Cancel run ${id}? Its running attempt is stopped and nothing else starts.`)) return;
    setActErr(undefined);
    // The run's stream brings the cancelled status (and the page reads what it lacks).
    try { await post(`/api/runs/${id}/cancel`); setNote("Cancelled."); } catch (x) { setActErr(x); }
  };
  const send = async (e: Event) => {
    e.preventDefault();
    let body: any = { name: signal };
    setActErr(undefined);
    try {
      if (payload.trim()) body.payload = parseJSON(payload, "The signal's payload");
      if (!confirm(`Send signal “${signal}” to run ${id}?`)) return;
      const r = await post<any>(`/api/runs/${id}/signals`, body);
      setNote(r.delivered ? `Signal “${signal}” delivered.` : r.message || `Signal “${signal}” stored: no wait took it yet.`);
    } catch (x) { setActErr(x); }
  };
  return (
    <section>
      <h1>Run of <A href={`/workflows/${run.workflowId}`} data-testid="run-workflow">{wfName || run.workflowId}</A> <Status s={run.status} /></h1>
      <p class="meta">Run <code>{run.runId}</code> · workflow version {run.workflowVersion}{wfName ? <> · <code>{run.workflowId}</code></> : null} · created {when(run.createdAt)} · finished {when(run.finishedAt)}</p>
      <RunRetention finishedAt={finished(run.status) ? run.finishedAt : null} />
      {run.waiting && (
        <p class="waiting" data-testid="waiting">
          Waiting at <b>{run.waiting.block_id}</b> for {run.waiting.kind === "signal" ? <>signal <code>{run.waiting.signal}</code>{run.waiting.until && <> until {when(run.waiting.until)}</>}</> : <>a sleep until {when(run.waiting.until)}</>}
        </p>
      )}
      {run.status === "queued" && run.queue && (
        <p class="waiting" data-testid="queue">Queued: {run.queue.message}</p>
      )}
      {run.error && <p class="error">Failed at <b>{run.error.block_id}</b>: {run.error.message}</p>}
      <div class="actions">
        <button onClick={cancel} disabled={finished(run.status)}>Cancel run</button>
        <form class="signal" onSubmit={send}>
          <input aria-label="Signal name" placeholder="signal name" value={signal} onInput={(e) => setSignal((e.target as HTMLInputElement).value)} required />
          <input aria-label="Signal payload" placeholder='payload (JSON, optional)' value={payload} onInput={(e) => setPayload((e.target as HTMLInputElement).value)} />
          <button type="submit" disabled={finished(run.status)}>Send signal</button>
        </form>
      </div>
      {note && <p class="note" role="status">{note}</p>}
      <ErrorBox err={actErr} />
      <ErrorBox err={f.bgErr} />
      <h2>Attempts</h2>
      <Timeline run={run} attempts={attempts} now={now} />
      <div class="table-scroll">
      <table class="attempts">
        <thead><tr><th scope="col">Block</th><th scope="col">Attempt</th><th scope="col">Status</th><th scope="col">Started</th><th scope="col">ms</th><th scope="col">Details</th></tr></thead>
        <tbody>
          {attempts.map((a) => (
            <tr key={a.id} id={a.id} class={`a-${a.status}`}>
              <td>{a.block_id} <small>{a.type}</small></td><td>{a.attempt}</td><td><Status s={a.status} /></td><td>{when(a.startedAt)}</td><td>{a.durationMs ?? "…"}</td>
              <td><details onToggle={(e) => { if ((e.target as HTMLDetailsElement).open && a.input === undefined) f.wantDetails(); }}><summary>input / output / error</summary><b>input</b><Json v={a.input} /><b>output</b><Json v={a.output} />{a.error && <><b>error</b><Json v={a.error} /></>}</details></td>
            </tr>
          ))}
        </tbody>
      </table>
      </div>
      <div class="two">
        <div><h2>Input</h2><Json v={run.input} /></div>
        <div><h2>Output</h2><Json v={run.output} /></div>
      </div>
      {run.workflow && <details><summary>Pinned definition (v{run.workflow.version})</summary><Graph def={run.workflow.definition} /><Json v={run.workflow.definition} /></details>}
    </section>
  );
}

// --- schedules

// The IANA zones the browser knows, offered while typing a timezone.
const ZONES: string[] = (() => {
  try { return ["UTC", ...(Intl as any).supportedValuesOf("timeZone")]; } catch { return ["UTC"]; }
})();
const localZone = () => { try { return Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC"; } catch { return "UTC"; } };

// atZone says a time as the clocks of zone read it (the browser's own when it does not know the zone).
function atZone(iso: string, zone: string): string {
  const opts: Intl.DateTimeFormatOptions = { weekday: "short", year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", timeZoneName: "short" };
  try { return new Date(iso).toLocaleString(undefined, { ...opts, timeZone: zone || "UTC" }); } catch { return new Date(iso).toLocaleString(undefined, opts); }
}

// PREVIEW_PAUSE is how long typing must pause before the page asks for the next fire times:
// each ask takes a rate-limit token.
const PREVIEW_PAUSE = 500;
const previews = new Map<string, { next?: string[]; err?: unknown }>(); // by cron and zone, while the first time is ahead

// useCronPreview asks the scheduler when cron would fire in zone (GET /api/schedules/preview:
// its own parser and DST rules), once typing has paused; each pair is asked once while its
// first fire time is ahead.
function useCronPreview(cron: string, zone: string) {
  const key = `${cron.trim()}\n${zone.trim()}`;
  const [state, setState] = useState<{ key: string; next?: string[]; err?: unknown; busy: boolean }>({ key: "", busy: false });
  useEffect(() => {
    if (!cron.trim()) { setState({ key, busy: false }); return; }
    const known = previews.get(key);
    // Fire times are relative to now: a list whose first time has passed is asked again.
    if (known?.next?.length && Date.parse(known.next[0]) <= Date.now()) previews.delete(key);
    else if (known) { setState({ key, ...known, busy: false }); return; }
    setState((s) => ({ ...s, busy: true }));
    const ctl = new AbortController();
    const t = setTimeout(() => {
      get<{ next: string[] }>(withQuery("/api/schedules/preview", { cron: cron.trim(), timezone: zone.trim() }), ctl.signal).then(
        (r) => { previews.set(key, { next: r.next }); setState({ key, next: r.next, busy: false }); },
        (x) => {
          if (ctl.signal.aborted) return;
          // A refused cron is remembered; a failure to ask is not.
          if (x instanceof APIError && x.status === 400) previews.set(key, { err: x });
          setState({ key, err: x, busy: false });
        });
    }, PREVIEW_PAUSE);
    return () => { clearTimeout(t); ctl.abort(); };
  }, [key]);
  return state.key === key ? state : { key, busy: !!cron.trim() };
}

function CronPreview({ cron, zone }: { cron: string; zone: string }) {
  const p = useCronPreview(cron, zone);
  return (
    <div class="cron-preview" data-testid="cron-preview" aria-live="polite">
      {!cron.trim() ? <small class="hint">Type a cron to see when it fires: 5 fields (minute hour day-of-month month day-of-week), such as <code>30 2 * * *</code>, or <code>@hourly</code>, <code>@daily</code>, <code>@weekly</code>.</small>
        : p.busy ? <small class="hint">Reading the next fire times…</small>
        : p.err ? <p class="invalid" data-testid="cron-invalid">{describeError(p.err).text}</p>
        : p.next ? (
          <>
            <small class="hint">Next fire times ({zone.trim() || "UTC"}):</small>
            <ol data-testid="next-fires">{p.next.map((t) => <li key={t}><time dateTime={t} title={`${new Date(t).toLocaleString()} your time`}>{atZone(t, zone.trim())}</time></li>)}</ol>
          </>
        ) : null}
    </div>
  );
}

let formSeq = 0;

// ScheduleForm makes a schedule (with a workflow chosen) or changes one's cron, timezone and
// enabled; the next fire times show while the cron is typed.
function ScheduleForm({ edit, workflowId, workflows, onDone, onCancel }: {
  edit?: Schedule; workflowId?: string; workflows: Workflow[]; onDone: (s: Schedule) => void; onCancel: () => void;
}) {
  const [id] = useState(() => `sf${++formSeq}`);
  const [wf, setWf] = useState(edit?.workflowId ?? workflowId ?? "");
  const [cron, setCron] = useState(edit?.cron ?? "");
  const [zone, setZone] = useState(edit?.timezone ?? localZone());
  const [enabled, setEnabled] = useState(edit?.enabled ?? true);
  const [input, setInput] = useState("");
  const [err, setErr] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setErr(undefined);
    setBusy(true);
    try {
      let s: Schedule;
      if (edit) {
        s = await call<Schedule>("PATCH", `/api/schedules/${edit.id}`, { cron: cron.trim(), timezone: zone.trim() || "UTC", enabled });
      } else {
        const body: any = { workflowId: wf, cron: cron.trim(), timezone: zone.trim() || "UTC", enabled };
        const v = parseJSON(input, "The input");
        if (v !== undefined) body.input = v;
        s = await post<Schedule>("/api/schedules", body);
      }
      onDone(s);
    } catch (x) { setErr(x); }
    setBusy(false);
  };
  const chosenKnown = !wf || workflows.some((w) => w.id === wf);
  return (
    <form class="schedule-form card" onSubmit={submit} data-testid={edit ? "edit-schedule" : "new-schedule"} aria-labelledby={`${id}-title`}>
      <h2 id={`${id}-title`}>{edit ? "Edit schedule" : "New schedule"}</h2>
      <div class="fields">
        {edit ? (
          <p class="field">Workflow: <A href={`/workflows/${edit.workflowId}`}>{workflowNames.get(edit.workflowId) || edit.workflowId}</A></p>
        ) : (
          <label class="field">Workflow
            <select value={wf} required onChange={(e) => setWf((e.target as HTMLSelectElement).value)}>
              <option value="">Choose a workflow…</option>
              {!chosenKnown && <option value={wf}>{wf}</option>}
              {workflows.map((w) => <option key={w.id} value={w.id}>{w.name}</option>)}
            </select>
          </label>
        )}
        <label class="field">Cron
          <input value={cron} required autocomplete="off" spellcheck={false} placeholder="30 2 * * *" aria-describedby={`${id}-preview`}
            onInput={(e) => setCron((e.target as HTMLInputElement).value)} />
        </label>
        <label class="field">Timezone
          <input value={zone} list={`${id}-zones`} autocomplete="off" spellcheck={false} placeholder="UTC"
            onInput={(e) => setZone((e.target as HTMLInputElement).value)} />
        </label>
        <datalist id={`${id}-zones`}>{ZONES.map((z) => <option key={z} value={z} />)}</datalist>
        <label class="check"><input type="checkbox" checked={enabled} onChange={(e) => setEnabled((e.target as HTMLInputElement).checked)} /> Enabled</label>
      </div>
      <div id={`${id}-preview`}><CronPreview cron={cron} zone={zone} /></div>
      {!edit && (
        <label class="field wide">Input <small class="hint">(JSON, optional: the run input of every fire)</small>
          <textarea rows={2} value={input} spellcheck={false} placeholder='{"report": "daily"}' onInput={(e) => setInput((e.target as HTMLTextAreaElement).value)} />
        </label>
      )}
      <ErrorBox err={err} />
      <div class="actions">
        <button type="submit" disabled={busy}>{edit ? "Save" : "Create schedule"}</button>
        <button type="button" class="secondary" onClick={onCancel}>Cancel</button>
      </div>
    </form>
  );
}

// Schedules lists the organization's schedules, a page at a time, and makes, changes and
// deletes them; /schedules?new=<workflowId> opens the form with that workflow chosen.
function Schedules({ query }: { query: URLSearchParams }) {
  const s = useModel((changed) => new PagedList<Schedule>("/api/schedules", (x) => x.id, changed), []);
  const wfs = useModel((changed) => new PagedList<Workflow>("/api/workflows", (w) => w.id, changed, 500), []);
  rememberNames(wfs.items);
  const asked = query.get("new");
  const [creating, setCreating] = useState(asked !== null);
  const [editing, setEditing] = useState<string | null>(null);
  const [err, setErr] = useState<unknown>();
  const [note, setNote] = useState("");
  useEffect(() => { if (asked !== null) { setCreating(true); setEditing(null); } }, [asked]);
  const name = (id: string) => workflowNames.get(id) || id;
  const closeCreate = () => {
    setCreating(false);
    if (asked !== null) history.replaceState(history.state, "", "/schedules");
  };
  // Each answer is the schedule as it is now: it replaces the row, with no list read.
  const toggle = async (x: Schedule) => {
    setErr(undefined);
    try { s.replace(await call<Schedule>("PATCH", `/api/schedules/${x.id}`, { enabled: !x.enabled })); } catch (e) { setErr(e); }
  };
  const remove = async (x: Schedule) => {
    if (!confirm(`Delete the schedule “${x.cron}” (${x.timezone}) of ${name(x.workflowId)}? It stops firing; runs it started stay.`)) return;
    setErr(undefined);
    try {
      await call("DELETE", `/api/schedules/${x.id}`);
      s.remove(x.id);
      setNote(`Schedule “${x.cron}” of ${name(x.workflowId)} deleted.`);
    } catch (e) { setErr(e); }
  };
  return (
    <section>
      <h1>Schedules</h1>
      {!creating && <button onClick={() => { setCreating(true); setEditing(null); setNote(""); }}>New schedule</button>}
      {creating && (
        <ScheduleForm workflowId={asked || undefined} workflows={wfs.items} onCancel={closeCreate}
          onDone={(x) => { s.prepend(x); closeCreate(); setNote(`Schedule “${x.cron}” of ${name(x.workflowId)} created.`); }} />
      )}
      {note && <p class="note" role="status">{note}</p>}
      <Failed list={s} />
      <ErrorBox err={err} />
      {!s.loaded && !s.err && <p>Loading…</p>}
      {s.loaded && s.items.length === 0 && <p class="empty">No schedules yet. Press “New schedule” to fire a workflow on a cron, or use <code>svc schedules create --workflow &lt;id&gt; --cron "0 9 * * 1"</code>; its next fire time shows here.</p>}
      {s.items.length > 0 && (
        <div class="table-scroll">
          <table class="schedules">
            <thead><tr><th scope="col">Workflow</th><th scope="col">Cron</th><th scope="col">Timezone</th><th scope="col">Next fire</th><th scope="col">Last fire</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
            <tbody>
              {s.items.map((x) => editing === x.id ? (
                <tr key={x.id} data-schedule={x.id} class="editing">
                  <td colSpan={6}>
                    <ScheduleForm edit={x} workflows={wfs.items} onCancel={() => setEditing(null)}
                      onDone={(y) => { s.replace(y); setEditing(null); setNote(`Schedule of ${name(y.workflowId)} saved.`); }} />
                  </td>
                </tr>
              ) : (
                <tr key={x.id} data-schedule={x.id}>
                  <td><A href={`/workflows/${x.workflowId}`}>{name(x.workflowId)}</A></td>
                  <td><code>{x.cron}</code></td>
                  <td>{x.timezone}</td>
                  <td data-testid="next-fire">{x.enabled ? when(x.nextFireAt) : "disabled"}</td>
                  <td>{when(x.lastFiredAt)}</td>
                  <td class="row-actions">
                    <button onClick={() => toggle(x)}>{x.enabled ? "Disable" : "Enable"}</button>
                    <button onClick={() => { setEditing(x.id); setCreating(false); setNote(""); }}>Edit</button>
                    <button class="danger" onClick={() => remove(x)}>Delete</button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <More list={s} what="schedules" />
    </section>
  );
}

// --- API keys
function Keys() {
  const keys = useLoad(() => get<any>("/api/auth/api-key/list"), []);
  const [raw, setRaw] = useState("");
  const [err, setErr] = useState<unknown>();
  const create = async (e: Event) => {
    e.preventDefault();
    const f = new FormData(e.target as HTMLFormElement);
    setErr(undefined);
    try { const k = await post<any>("/api/auth/api-key/create", { name: f.get("name") }); setRaw(k.key); keys.reload(); } catch (x) { setErr(x); }
  };
  const revoke = async (k: any) => {
    if (!confirm(`Revoke key “${k.name}” (${k.start}…)? Requests with it fail at once.`)) return;
    setErr(undefined);
    try { await post("/api/auth/api-key/delete", { keyId: k.id }); keys.reload(); } catch (x) { setErr(x); }
  };
  const list: any[] = keys.data?.apiKeys || [];
  return (
    <section>
      <h1>API keys</h1>
      <form class="inline" onSubmit={create}><input name="name" aria-label="Key name" placeholder="key name" required /><button type="submit">Create key</button></form>
      {raw && <p class="note" data-testid="raw-key">Copy it now, it is shown only once: <code>{raw}</code> <button class="link" onClick={() => setRaw("")}>Done</button></p>}
      <ErrorBox err={keys.err || err} />
      {keys.data && list.length === 0 && <p class="empty">No API keys. Create one above for your scripts (sent as <code>X-Api-Key</code>) or the CLI (<code>SVC_API_KEY</code>).</p>}
      {list.length > 0 && (
        <div class="table-scroll">
          <table>
            <thead><tr><th scope="col">Name</th><th scope="col">Starts with</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
            <tbody>
              {list.map((k) => (
                <tr key={k.id} data-key={k.id}><td>{k.name}</td><td><code>{k.start}…</code></td><td>{when(k.createdAt)}</td><td>{when(k.lastRequest)}</td>
                  <td><button onClick={() => revoke(k)} aria-label={`Revoke ${k.name}`}>Revoke</button></td></tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

// --- the organization's settings

// useRole is the signed-in user's role in the active organization ("owner", "admin",
// "member"), from its members list (an /api/auth read: no rate-limit token): undefined while
// it is read, null when it could not be.
function useRole(userId?: string): string | null | undefined {
  const members = useLoad(() => get<{ members: { userId: string; role: string }[] }>("/api/auth/organization/list-members"), [userId]);
  if (members.loading) return undefined;
  return members.data?.members?.find((m) => m.userId === userId)?.role ?? null;
}

// mayChangeSettings: owners and admins may (a role may be a list, "admin,member": the strongest
// counts); undefined and null (not known yet, not known) pass through.
const mayChangeSettings = (role: string | null | undefined) =>
  typeof role === "string" ? role.split(",").some((x) => ["owner", "admin"].includes(x.trim())) : role;

// Organization is the active organization's settings: its run retention, which owners and
// admins may shorten (members read it).
function Organization({ session }: { session: any }) {
  const orgs = useLoad(() => get<any[]>("/api/auth/organization/list"), []);
  const active = session?.session?.activeOrganizationId;
  const name = (orgs.data || []).find((o) => o.id === active)?.name;
  const role = useRole(session?.user?.id);
  return (
    <section data-testid="organization">
      <h1>Settings{name && <> <small>{name}</small></>}</h1>
      <p class="meta">Settings of the organization open in this session. Its API keys have a page of their own: <A href="/keys">API keys</A>.</p>
      <RetentionSettings mayChange={mayChangeSettings(role)} role={role ?? null} />
    </section>
  );
}

// OpenNav heads the pages shown without a session.
const OpenNav = () => (
  <nav aria-label="Main">
    <strong>svc</strong>
    <A href="/docs">API reference</A>
    <span class="grow" />
    <A href="/signin">Sign in</A>
  </nav>
);

// --- the app

// route is the page a signed-in path shows; null for a path the console has no page for.
function route(seg: string[], query: URLSearchParams, session?: any) {
  const [top, id, more] = seg;
  switch (top) {
    case undefined: case "signin": case "signup":
      return seg.length <= 1 ? <Workflows /> : null;
    case "workflows":
      if (id === "new") return more === undefined ? <NewWorkflow /> : null;
      // A workflow's page reads what follows its id itself (its editor's views).
      return id ? <WorkflowPage id={id} /> : <Workflows />;
    case "runs":
      if (more !== undefined) return null;
      return id ? <RunPage id={id} /> : <Runs query={query} />;
    case "schedules":
      return id ? null : <Schedules query={query} />;
    case "keys":
      return id ? null : <Keys />;
    case "organization":
      return id ? null : <Organization session={session} />;
  }
  return null;
}

function App() {
  const path = usePath();
  const session = useLoad(() => get<any>("/api/auth/get-session"), []);
  const [u, qs] = path.split("?");
  const query = new URLSearchParams(qs || "");
  const signOut = () => { forgetRetention(); navigate("/signin"); session.reload(); };
  // The API reference is open: it shows at once, in the console's frame once a session is known.
  if (u === "/docs" || u.startsWith("/docs/")) {
    if (session.data) return <Shell session={session.data} onSignOut={signOut} anyOrg><Docs signedIn /></Shell>;
    return <><OpenNav /><main><Docs signedIn={false} /></main></>;
  }
  if (session.loading) return <><RateLimited /><p>Loading…</p></>;
  const seg = u.split("/").filter(Boolean);
  const page = route(seg, query, session.data);
  if (!session.data) {
    // An address the console has no page for is said so, signed in or not.
    if (!page) return <><OpenNav /><main><NotFound back="/signin" backLabel="Sign in" /></main></>;
    const up = u === "/signup";
    return <><RateLimited /><SignIn up={up} onDone={() => { if (u === "/signin" || up) navigate("/workflows"); session.reload(); }} /></>;
  }
  return <Shell session={session.data} onSignOut={signOut} anyOrg={!page}>{page ?? <NotFound />}</Shell>;
}

render(<App />, document.getElementById("app")!);
