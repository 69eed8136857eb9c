import { render } from "preact";
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { attemptOver, call, finished, get, onRateLimit, post, type Attempt, type RateNotice, type Run, type Workflow } from "./api";
import { Docs } from "./docs";
import { RunFollower } from "./follower";
import { Graph } from "./graph";
import { PagedList, RunsList } from "./lists";
import { A, ErrorBox, Failed, Json, More, Status, navigate, sentence, useLoad, useModel, usePath, when } from "./ui";
import { NewWorkflow, WorkflowPage } from "./workflow";
import "./style.css";

// RateLimited shows a request waiting out a 429: the contract's code and message, and when it
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
  return (
    <p class="error" role="alert" data-testid="rate-limited">
      <code>{n.code}</code> {n.message !== n.code ? sentence(n.message) : ""} Retrying in {Math.max(1, Math.ceil((n.until - Date.now()) / 1000))} s.
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
      <form onSubmit={submit}>
        <h2>{up ? "Create an account" : "Sign in"}</h2>
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
  return ["workflows", "runs", "schedules", "keys"].includes(seg) ? `/${seg}` : "/workflows";
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
      <nav>
        <strong>svc</strong>
        <A href="/workflows">Workflows</A>
        <A href="/runs">Runs</A>
        <A href="/schedules">Schedules</A>
        <A href="/keys">API keys</A>
        <A href="/docs">API reference</A>
        <span class="grow" />
        <select aria-label="Organization" value={active ?? ""} onChange={(e) => switchOrg((e.target as HTMLSelectElement).value)}>
          {!active && <option value="">(no organization)</option>}
          {(orgs.data || []).map((o) => <option value={o.id} key={o.id}>{o.name}</option>)}
        </select>
        <span class="who">{session?.user?.email}</span>
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
      <table>
        <tbody>
          {shown.map((w) => (
            <tr key={w.id}><td><A href={`/workflows/${w.id}`}>{w.name}</A></td><td><code>{w.id}</code></td><td>v{w.version}</td><td>{when(w.updatedAt)}</td></tr>
          ))}
        </tbody>
      </table>
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
      <table>
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
              const s = Date.parse(a.startedAt), left = ((s - t0) / total) * 100, width = Math.max(0.6, ((end(a) - s) / total) * 100);
              const wait = a.type === "wait" && a.status === "running";
              return (
                <a href={`#${a.id}`} key={a.id} class={`bar b-${a.status}${a.type === "wait" ? " wait" : ""}`} data-attempt={a.id} data-status={a.status}
                  style={{ left: `${left}%`, width: `${width}%` }} title={`${a.block_id} #${a.attempt} ${a.status} ${a.durationMs ?? "…"} ms`}>
                  {wait ? "waiting" : `#${a.attempt}`}
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
  if (err) return <ErrorBox err={err} />;
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
      if (payload.trim()) body.payload = JSON.parse(payload);
      if (!confirm(`Send signal “${signal}” to run ${id}?`)) return;
      const r = await post<any>(`/api/runs/${id}/signals`, body);
      setNote(r.delivered ? `Signal “${signal}” delivered.` : r.message || `Signal “${signal}” stored: no wait took it yet.`);
    } catch (x) { setActErr(x); }
  };
  return (
    <section>
      <h1>Run <code>{run.runId}</code> <Status s={run.status} /></h1>
      <p>Workflow <A href={`/workflows/${run.workflowId}`}>{run.workflowId}</A> v{run.workflowVersion} · created {when(run.createdAt)} · finished {when(run.finishedAt)}</p>
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
      <table class="attempts">
        <thead><tr><th>block</th><th>#</th><th>status</th><th>started</th><th>ms</th><th></th></tr></thead>
        <tbody>
          {attempts.map((a) => (
            <tr key={a.id} id={a.id} class={`a-${a.status}`}>
              <td>{a.block_id} <small>{a.type}</small></td><td>{a.attempt}</td><td><Status s={a.status} /></td><td>{when(a.startedAt)}</td><td>{a.durationMs ?? "…"}</td>
              <td><details onToggle={(e) => { if ((e.target as HTMLDetailsElement).open && a.input === undefined) f.wantDetails(); }}><summary>input / output / error</summary><b>input</b><Json v={a.input} /><b>output</b><Json v={a.output} />{a.error && <><b>error</b><Json v={a.error} /></>}</details></td>
            </tr>
          ))}
        </tbody>
      </table>
      <div class="two">
        <div><h2>Input</h2><Json v={run.input} /></div>
        <div><h2>Output</h2><Json v={run.output} /></div>
      </div>
      {run.workflow && <details><summary>Pinned definition (v{run.workflow.version})</summary><Graph def={run.workflow.definition} errors={[]} /><Json v={run.workflow.definition} /></details>}
    </section>
  );
}

// --- schedules
function Schedules() {
  const s = useModel((changed) => new PagedList<any>("/api/schedules", (x) => x.id, changed), []);
  const [err, setErr] = useState<unknown>();
  // The answer is the schedule as it is now: it replaces the row, with no list read.
  const toggle = async (x: any) => {
    setErr(undefined);
    try { s.replace(await call("PATCH", `/api/schedules/${x.id}`, { enabled: !x.enabled })); } catch (e) { setErr(e); }
  };
  return (
    <section>
      <h1>Schedules</h1>
      <Failed list={s} />
      <ErrorBox err={err} />
      {!s.loaded && !s.err && <p>Loading…</p>}
      {s.loaded && s.items.length === 0 && <p class="empty">No schedules. Create one with <code>svc schedules create --workflow &lt;id&gt; --cron "0 9 * * 1"</code> or <code>POST /api/schedules {"{workflowId, cron}"}</code>; its next fire time shows here.</p>}
      <table>
        <tbody>
          {s.items.map((x) => (
            <tr key={x.id} data-schedule={x.id}><td><code>{x.cron}</code> {x.timezone}</td><td><A href={`/workflows/${x.workflowId}`}>{x.workflowId}</A></td>
              <td>{x.enabled ? `next ${when(x.nextFireAt)}` : "disabled"}</td><td>last {when(x.lastFiredAt)}</td>
              <td><button onClick={() => toggle(x)}>{x.enabled ? "Disable" : "Enable"}</button></td></tr>
          ))}
        </tbody>
      </table>
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
      <table>
        <tbody>
          {list.map((k) => (
            <tr key={k.id} data-key={k.id}><td>{k.name}</td><td><code>{k.start}…</code></td><td>created {when(k.createdAt)}</td><td>last used {when(k.lastRequest)}</td>
              <td><button onClick={() => revoke(k)}>Revoke</button></td></tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

// OpenNav heads the pages shown without a session.
const OpenNav = () => (
  <nav>
    <strong>svc</strong>
    <A href="/docs">API reference</A>
    <span class="grow" />
    <A href="/signin">Sign in</A>
  </nav>
);

// --- the app
function App() {
  const path = usePath();
  const session = useLoad(() => get<any>("/api/auth/get-session"), []);
  const [u, qs] = path.split("?");
  const query = new URLSearchParams(qs || "");
  const signOut = () => { navigate("/signin"); session.reload(); };
  // The API reference is open: it shows at once, in the console's frame once a session is known.
  if (u === "/docs" || u.startsWith("/docs/")) {
    if (session.data) return <Shell session={session.data} onSignOut={signOut} anyOrg><Docs signedIn /></Shell>;
    return <><OpenNav /><main><Docs signedIn={false} /></main></>;
  }
  if (session.loading) return <><RateLimited /><p>Loading…</p></>;
  if (!session.data) {
    const up = u === "/signup";
    return <><RateLimited /><SignIn up={up} onDone={() => { if (u === "/signin" || up) navigate("/workflows"); session.reload(); }} /></>;
  }
  const seg = u.split("/").filter(Boolean);
  let page;
  if (seg[0] === "workflows" && seg[1] === "new") page = <NewWorkflow />;
  else if (seg[0] === "workflows" && seg[1]) page = <WorkflowPage id={seg[1]} />;
  else if (seg[0] === "runs" && seg[1]) page = <RunPage id={seg[1]} />;
  else if (seg[0] === "runs") page = <Runs query={query} />;
  else if (seg[0] === "schedules") page = <Schedules />;
  else if (seg[0] === "keys") page = <Keys />;
  else page = <Workflows />;
  return <Shell session={session.data} onSignOut={signOut}>{page}</Shell>;
}

render(<App />, document.getElementById("app")!);
