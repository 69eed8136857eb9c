// The workflow page: its graph, edited in place, and the box that starts a run.
//
// Every change is one batch of operations sent to POST /api/workflows/:id/operations with
// If-Match: the version shown, so a change made elsewhere meanwhile is never overwritten: the
// 412 says so, lists what changed, and offers to reload (and to send the change again on the
// new version). What the API skipped shows on the block and the field it names, in words, with
// its hint as buttons: a did_you_mean sends the fix, allowed values are choices.

import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { APIError, call, get, post, type Block, type Definition, type Workflow } from "./api";
import {
  type Op, type OpsResult, type Problem, type Sent, type Skipped, type VError, changes, fixBatch, fixOp, fixValidation,
  freeId, paramChanges, plain, plainMessage, problemsOf, refsFor, renameOps, replay, triggerOf,
} from "./edit";
import { EditGraph, type Selection } from "./editgraph";
import { type Connector, type Raw, fieldsOf, fromRaw, oneOfRequired, pointerParts, toRaw } from "./schema";
import { type FieldNote, Notes, SchemaForm } from "./schemaform";
import { A, ErrorBox, type FieldError, Json, PageError, cut, fieldErrors, navigate, parseJSON, useLoad, words } from "./ui";
import "./editor.css";

const defOf = (w: Workflow): Definition => ({ blocks: w.definition?.blocks || [], edges: w.definition?.edges || [] });

// useCatalog reads the connector catalog once per page.
function useCatalog() {
  const c = useLoad(() => get<{ connectors: Connector[] }>("/api/connectors"), []);
  const map = useMemo(() => new Map((c.data?.connectors || []).map((x) => [x.type, x])), [c.data]);
  return { cat: map, err: c.err, loaded: !!c.data };
}

// NewWorkflow creates a workflow (name, description) and opens it.
export function NewWorkflow() {
  const [err, setErr] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const create = async (e: Event) => {
    e.preventDefault();
    const f = new FormData(e.target as HTMLFormElement);
    setErr(undefined);
    setBusy(true);
    try {
      const w = await post<Workflow>("/api/workflows", { name: String(f.get("name") || "").trim(), description: String(f.get("description") || "").trim() || undefined });
      navigate(`/workflows/${w.id}`);
    } catch (x) { setErr(x); setBusy(false); }
  };
  return (
    <form class="card new-workflow" onSubmit={create} aria-label="New workflow">
      <h2>New workflow</h2>
      <div class="field"><label for="nw-name">Name<span class="req" aria-hidden="true">*</span></label><input id="nw-name" name="name" required maxLength={200} autocomplete="off" /></div>
      <div class="field"><label for="nw-desc">Description</label><input id="nw-desc" name="description" autocomplete="off" /></div>
      <ErrorBox err={err} />
      <button type="submit" disabled={busy}>Create workflow</button>
    </form>
  );
}

export function WorkflowPage({ id }: { id: string }) {
  const [wf, setWf] = useState<Workflow>();
  const [loadErr, setLoadErr] = useState<unknown>();
  const { cat, err: catErr, loaded } = useCatalog();
  const [sel, setSel] = useState<Selection>(null);
  const [adding, setAdding] = useState<{ type?: string } | null>(null);
  const [connecting, setConnecting] = useState<string | null>(null);
  const [branch, setBranch] = useState("true");
  const [sent, setSent] = useState<Sent | null>(null);
  const [conflict, setConflict] = useState<{ what: string; now: Workflow; changed: string[]; redo: (now: Workflow) => Promise<unknown> } | null>(null);
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState<unknown>();
  const [zoom, setZoom] = useState(1);

  const load = async () => {
    try { setWf(await get<Workflow>(`/api/workflows/${id}`)); setLoadErr(undefined); } catch (x) { setLoadErr(x); }
  };
  useEffect(() => { setWf(undefined); setSel(null); setSent(null); load(); }, [id]);
  // A block just added or renamed takes the focus on the graph (its panel opens beside it),
  // so the keyboard goes on from there and not from the top of the page.
  const [focusId, setFocusId] = useState<string | null>(null);
  useEffect(() => {
    if (!focusId) return;
    (document.querySelector(`[data-block="${CSS.escape(focusId)}"] .body`) as SVGGElement | null)?.focus();
    setFocusId(null);
  });
  // While a connection is being made, its bar has the focus (the handle that started it is
  // gone): Tab goes on to the blocks.
  const bar = useRef<HTMLDivElement>(null);
  useEffect(() => { if (connecting) bar.current?.focus(); }, [connecting]);
  // Escape ends a connection being made.
  useEffect(() => {
    if (!connecting) return;
    const on = (e: KeyboardEvent) => { if (e.key === "Escape") setConnecting(null); };
    addEventListener("keydown", on);
    return () => removeEventListener("keydown", on);
  }, [connecting]);

  // send sends one batch on workflow base's version and returns the answer and the workflow
  // after it; null on a refusal, which is shown. A 412 reads the workflow again and offers to
  // reload, or to do the change again (redo, on the workflow read) when one is given.
  const send = async (base: Workflow, ops: Op[], what: string, redo?: (now: Workflow) => Promise<unknown>): Promise<{ result: OpsResult; wf: Workflow } | null> => {
    if (ops.length === 0) return null;
    setBusy(true);
    setErr(undefined);
    try {
      const result = await call<OpsResult>("POST", `/api/workflows/${id}/operations`, { ops }, undefined, { "If-Match": `"${base.version}"` });
      const next = after(base, ops, result);
      setSent({ ops, result, what });
      setConflict(null);
      setWf(next);
      return { result, wf: next };
    } catch (x) {
      if (x instanceof APIError && x.status === 412) {
        try {
          const now = await get<Workflow>(`/api/workflows/${id}`);
          setConflict({ what, now, changed: changes(defOf(base), defOf(now)), redo: redo ?? ((w) => send(w, ops, what)) });
        } catch (y) { setErr(y); }
      } else setErr(x);
      return null;
    } finally {
      setBusy(false);
    }
  };
  // apply sends one batch on the version shown.
  const apply: Apply = async (ops, what) => (wf ? (await send(wf, ops, what))?.result ?? null : null);
  // rename sends the two batches of a rename (edit.ts, renameOps): the second only once the
  // block exists under its new id. It reports whether the rename is done.
  const rename = async (base: Workflow, from: string, to: string): Promise<boolean> => {
    const { first, then } = renameOps(defOf(base), from, to);
    const redo = (now: Workflow) => rename(now, from, to);
    const r1 = await send(base, first, `rename ${from} to ${to}`, redo);
    if (!r1 || r1.result.skipped_items.some((s) => s.operation_index === 0)) return false;
    const r2 = await send(r1.wf, then, `rename ${from} to ${to}`, redo);
    return !!r2 && r2.result.skipped_items.length === 0;
  };

  if (loadErr) return <PageError err={loadErr} what={`There is no workflow ${id} in this organization.`} back="/workflows" backLabel="Back to the workflows" retry={load} />;
  // The editor waits for the catalog: a block's form is made from its connector's schema.
  if (!loaded) return catErr ? <PageError err={catErr} retry={() => location.reload()} /> : <p>Loading…</p>;
  if (!wf) return <p>Loading…</p>;
  const def = defOf(wf), verrs: VError[] = wf.validation_errors || [];

  // Problems by block: validation errors and the last batch's skips that name a block that exists.
  const skipped = sent?.result.skipped_items || [];
  const problems = new Map<string, number>();
  for (const e of verrs) if (e.block_id) problems.set(e.block_id, (problems.get(e.block_id) || 0) + 1);
  const exists = new Set(def.blocks.map((b) => b.block_id));
  for (const s of skipped) if (exists.has(s.block_id) && s.operation_type === "update") problems.set(s.block_id, (problems.get(s.block_id) || 0) + 1);

  const selBlock = sel?.kind === "block" ? def.blocks.find((b) => b.block_id === sel.id) : undefined;
  const selEdge = sel?.kind === "edge" ? def.edges.find((e) => e.block_id === sel.from && e.target_block_id === sel.to) : undefined;
  const startConnect = (from: string) => {
    const b = def.blocks.find((x) => x.block_id === from);
    if (b?.type === "condition") setBranch(def.edges.some((e) => e.block_id === from && e.branch === "true") ? "false" : "true");
    setConnecting(from);
  };
  const finishConnect = async (to: string) => {
    const from = connecting!;
    setConnecting(null);
    const b = def.blocks.find((x) => x.block_id === from);
    await apply([{ operation_type: "connect", block_id: from, target_block_id: to, ...(b?.type === "condition" ? { branch } : {}) }], `connect ${from} to ${to}`);
  };

  // Skips of the last batch that belong to no field shown elsewhere: listed above the graph.
  const addOpSkipped = skipped.filter((s) => sent!.ops[s.operation_index]?.operation_type === "add" && !exists.has(s.block_id));
  const trig = triggerOf(def, cat);

  return (
    <section class="workflow">
      <h1>{wf.name} <small>v{wf.version} · <code>{wf.id}</code></small></h1>
      {wf.description && <p>{wf.description}</p>}
      {conflict && (
        <div class="conflict" role="alert" data-testid="conflict">
          <p><b>This workflow changed since you opened it</b> (v{wf.version} → v{conflict.now.version}), so your change ({conflict.what}) was not applied.</p>
          {conflict.changed.length > 0 ? <ul>{conflict.changed.map((c, i) => <li key={i}>{c}</li>)}</ul> : <p>Its name or description changed.</p>}
          <button onClick={() => { setWf(conflict.now); setConflict(null); setSent(null); }}>Reload</button>{" "}
          <button onClick={async () => { const c = conflict; setWf(c.now); setConflict(null); await c.redo(c.now); }}>Reload and apply my change again</button>
        </div>
      )}
      <div class="toolbar" role="toolbar" aria-label="Edit the workflow">
        <button onClick={() => { setAdding({}); setConnecting(null); setSent(null); }} disabled={busy}>Add block</button>
        <span class="zoom">
          <button class="ghost" onClick={() => setZoom((z) => Math.max(0.4, +(z - 0.2).toFixed(1)))} aria-label="Zoom out">−</button>
          <span aria-live="polite">{Math.round(zoom * 100)} %</span>
          <button class="ghost" onClick={() => setZoom((z) => Math.min(1.6, +(z + 0.2).toFixed(1)))} aria-label="Zoom in">+</button>
        </span>
        {busy && <span class="hint" role="status">Saving…</span>}
        {sent && !busy && <span class={sent.result.ok ? "saved" : "hint"} role="status" data-testid="summary">{sent.result.ok ? `Saved: ${sent.what}.` : `${sent.result.skipped_items.length} of ${sent.ops.length} change${sent.ops.length > 1 ? "s" : ""} not applied: see below.`}</span>}
      </div>
      <ErrorBox err={err} />
      {connecting && (
        <div class="connect-bar" role="status" data-testid="connecting" tabIndex={-1} ref={bar}>
          Choose the block that follows <b>{connecting}</b>
          {def.blocks.find((b) => b.block_id === connecting)?.type === "condition" && (
            <label> on the branch <select value={branch} onChange={(e) => setBranch((e.target as HTMLSelectElement).value)} aria-label="Branch"><option>true</option><option>false</option></select></label>
          )}
          {" "}<button class="ghost" onClick={() => setConnecting(null)}>Cancel</button> <small class="hint">(or Escape)</small>
        </div>
      )}
      {sent && <SkippedList sent={sent} def={def} apply={apply} hideAdd={!!adding} />}
      <div class="editor">
        <div class="card canvas">
          {def.blocks.length === 0 ? (
            <div class="empty-graph">
              <p class="empty">This workflow has no blocks yet. A workflow starts at a trigger: add one, then the blocks that follow it.</p>
              <button onClick={() => { setAdding({ type: "trigger.manual" }); setSent(null); }}>Add a manual trigger</button>
            </div>
          ) : (
            <EditGraph def={def} cat={cat} problems={problems} selected={sel} connecting={connecting} zoom={zoom}
              onSelect={(s) => { setSel(s); setAdding(null); }} onHandle={startConnect} onTarget={finishConnect} />
          )}
        </div>
        <aside class="panel" aria-label="Details">
          {adding ? (
            <AddPanel key={adding.type || ""} cat={cat} def={def} initialType={adding.type} after={selBlock?.block_id || (def.blocks.length ? def.blocks[def.blocks.length - 1].block_id : "")}
              apply={apply} sent={sent} skipped={addOpSkipped} busy={busy}
              onDone={(bid) => { setAdding(null); setSel({ kind: "block", id: bid }); setFocusId(bid); }} onCancel={() => setAdding(null)} />
          ) : selBlock ? (
            <BlockPanel key={selBlock.block_id + JSON.stringify(selBlock.params ?? {})} block={selBlock} def={def} cat={cat} verrs={verrs.filter((e) => e.block_id === selBlock.block_id)}
              sent={sent} apply={apply} rename={(from, to) => rename(wf, from, to)} busy={busy} onRenamed={(to) => { setSel({ kind: "block", id: to }); setFocusId(to); }} onRemoved={() => setSel(null)}
              onConnect={() => startConnect(selBlock.block_id)} />
          ) : selEdge ? (
            <EdgePanel edge={selEdge} def={def} apply={apply} busy={busy} onRemoved={() => setSel(null)} />
          ) : (
            <div class="hint">
              <p>Select a block to change its settings, rename or remove it; select a connection to change its branch or remove it.</p>
              <p>To connect two blocks, press the <b>+</b> under the first one, then the block that follows it.</p>
            </div>
          )}
        </aside>
      </div>
      <Problems verrs={verrs} def={def} apply={apply} busy={busy} onAddTrigger={(t) => { setAdding({ type: t }); setSent(null); }} onSelect={(bid) => setSel({ kind: "block", id: bid })} />
      <RunBox wf={wf} trigger={trig} runnable={verrs.length === 0 && def.blocks.length > 0} />
      <details><summary>JSON</summary><Json v={wf} /></details>
    </section>
  );
}

// after is the workflow once a batch was answered: the answer has no definition, so the ops
// that applied are replayed on the one held (edit.ts, replay).
const after = (w: Workflow, ops: Op[], r: OpsResult): Workflow =>
  r.version === w.version ? { ...w, validation_errors: r.validation_errors }
    : { ...w, version: r.version, validation_errors: r.validation_errors, definition: replay(defOf(w), ops, r.skipped_items), updatedAt: new Date().toISOString() };

type Apply = (ops: Op[], what: string) => Promise<OpsResult | null>;

// FixButtons are the fixes a hint offers for problem p of op: its did_you_mean as a button, its
// allowed values as a choice; each sends the op again, fixed.
function FixButtons({ op, p, onFix, busy }: { op: Op; p: Problem; onFix: (fixed: Op) => void; busy: boolean }) {
  const h = p.hint;
  if (!h) return null;
  const dym = h.did_you_mean;
  const show = (v: unknown) => (typeof v === "string" ? v : JSON.stringify(v));
  const fixed = dym !== undefined ? fixOp(op, p, dym) : null;
  // For a number out of its range the API sends the range's bounds as allowed: not choices.
  const range = p.reason_code === "invalid_param" && h.allowed?.length === 2 && h.allowed.every((v) => typeof v === "number") ? h.allowed as number[] : null;
  const allowed = range ? [] : (h.allowed || []).filter((v) => v !== dym);
  return (
    <>
      {fixed && <button class="fix" disabled={busy} onClick={() => onFix(fixed)} data-testid="did-you-mean">Use “{cut(show(dym), 60)}”</button>}
      {range && <span class="hint"> (from {range[0]} to {range[1]})</span>}
      {p.reason_code === "hidden_param_in_input" && (() => { const f = fixOp(op, p, undefined); return f && <button class="fix" disabled={busy} onClick={() => onFix(f)}>Leave it out</button>; })()}
      {allowed.length > 0 && p.reason_code !== "hidden_param_in_input" && (
        <select class="fix" aria-label="Choose an allowed value" value="" disabled={busy} onChange={(e) => {
          const v = allowed[Number((e.target as HTMLSelectElement).value)];
          const f = fixOp(op, p, v);
          if (f) onFix(f);
        }}>
          <option value="">{dym !== undefined ? "or choose…" : "choose one…"}</option>
          {allowed.slice(0, 50).map((v, i) => <option key={i} value={i}>{show(v)}</option>)}
        </select>
      )}
    </>
  );
}

// SkippedList lists the last batch's skipped operations that no panel shows on a field: the
// connections, removals and the adds of blocks that do not exist (when no add form is open).
function SkippedList({ sent, def, apply, hideAdd }: { sent: Sent; def: Definition; apply: Apply; hideAdd: boolean }) {
  const exists = new Set(def.blocks.map((b) => b.block_id));
  const items = sent.result.skipped_items.filter((s) => {
    const op = sent.ops[s.operation_index];
    if (!op) return true;
    if (op.operation_type === "update" && exists.has(op.block_id)) return false; // on the block's fields
    if (op.operation_type === "add" && hideAdd) return false; // on the add form
    return true;
  });
  if (items.length === 0) return null;
  return (
    <div class="skipped" role="alert" data-testid="skipped">
      <p><b>Not applied</b> ({sent.what}):</p>
      <ul>
        {items.map((s) => <SkipItem key={s.operation_index} s={s} sent={sent} apply={apply} />)}
      </ul>
    </div>
  );
}

function SkipItem({ s, sent, apply }: { s: Skipped; sent: Sent; apply: Apply }) {
  const op = sent.ops[s.operation_index];
  const [busy, setBusy] = useState(false);
  const onFix = async (fixed: Op) => { setBusy(true); await apply(fixBatch(sent, s, fixed), `fix ${fixed.operation_type} ${fixed.block_id}`); setBusy(false); };
  return (
    <li data-skip={s.reason_code}>
      {problemsOf(s).map((p, i) => (
        <div key={i}>{plain(p, op)} {op && <FixButtons op={op} p={p} onFix={onFix} busy={busy} />}
          <details class="why"><summary>Details</summary><p>{p.reason}</p></details></div>
      ))}
    </li>
  );
}

// notesOf turns the last batch's skips of the op at index (its problems pointing into
// "/params/…") and validation errors into notes by field pointer.
function skipNotes(sent: Sent | null, pick: (op: Op) => boolean, onFix: (s: Skipped, fixed: Op) => void, busy: boolean): { byField: Map<string, FieldNote[]>; rest: FieldNote[] } {
  const byField = new Map<string, FieldNote[]>(), rest: FieldNote[] = [];
  if (!sent) return { byField, rest };
  for (const s of sent.result.skipped_items) {
    const op = sent.ops[s.operation_index];
    if (!op || !pick(op)) continue;
    for (const p of problemsOf(s)) {
      const note: FieldNote = { message: plain(p, op), fix: <FixButtons op={op} p={p} busy={busy} onFix={(f) => onFix(s, f)} /> };
      const ptr = p.hint?.pointer;
      if (ptr?.startsWith("/params/") && p.reason_code !== "unknown_param" && p.reason_code !== "hidden_param_in_input") {
        const key = "/params/" + pointerParts(ptr)[1];
        byField.set(key, [...(byField.get(key) || []), note]);
      } else rest.push(note);
    }
  }
  return { byField, rest };
}

// AddPanel adds a block: a type chosen from the searchable catalog, its id, the block it
// follows, its params from the connector's schema. One batch: the add and its connection.
function AddPanel({ cat, def, initialType, after, apply, sent, skipped, busy, onDone, onCancel }: {
  cat: Map<string, Connector>; def: Definition; initialType?: string; after: string; apply: Apply; sent: Sent | null; skipped: Skipped[];
  busy: boolean; onDone: (id: string) => void; onCancel: () => void;
}) {
  const [type, setType] = useState(initialType || "");
  const [q, setQ] = useState("");
  const conn = type ? cat.get(type) : undefined;
  const fields = useMemo(() => (conn ? fieldsOf(conn.params) : []), [conn]);
  const [bid, setBid] = useState(() => (initialType ? freeId(def, initialType) : ""));
  const [from, setFrom] = useState(conn?.category === "trigger" ? "" : after);
  const [branch, setBranch] = useState("true");
  const [raw, setRaw] = useState<Raw>(() => (conn ? defaults(fields) : {}));
  const [errs, setErrs] = useState<FieldError[]>([]);
  const choose = (t: string) => {
    const c = cat.get(t)!;
    const fs = fieldsOf(c.params);
    setType(t); setBid(freeId(def, t)); setRaw(defaults(fs)); setErrs([]);
    setFrom(c.category === "trigger" ? "" : after);
  };
  if (!conn) {
    const needle = q.trim().toLowerCase();
    const list = [...cat.values()].filter((c) => !needle || [c.type, c.title, c.description, c.category].some((s) => s.toLowerCase().includes(needle)));
    const cats = ["trigger", "action", "logic", "wait"];
    return (
      <div class="add" data-testid="catalog">
        <h2>Add a block</h2>
        <input type="search" aria-label="Search block types" placeholder="Search: http, wait, condition…" value={q} onInput={(e) => setQ((e.target as HTMLInputElement).value)} autoFocus />
        {cats.map((k) => {
          const cs = list.filter((c) => c.category === k);
          return cs.length ? (
            <div key={k} class="cat-group"><h3>{k === "trigger" ? "Triggers" : k === "action" ? "Actions" : k === "logic" ? "Logic" : "Waits"}</h3>
              <ul class="catalog">{cs.map((c) => (
                <li key={c.type}><button class="entry" onClick={() => choose(c.type)} data-type={c.type}><b>{c.title}</b> <code>{c.type}</code><small>{c.description}</small></button></li>
              ))}</ul></div>
          ) : null;
        })}
        {list.length === 0 && <p class="empty">No block type matches “{q}”.</p>}
        <button class="ghost" onClick={onCancel}>Cancel</button>
      </div>
    );
  }
  const refs = refsFor(def, cat, bid, from ? [from] : []);
  const fromBlock = def.blocks.find((b) => b.block_id === from);
  const submit = async (e: Event) => {
    e.preventDefault();
    const fe: FieldError[] = [];
    const params = fromRaw(fields, raw, "/params", fe);
    // A taken id is refused here: sent, the add would be skipped but its connection would
    // apply to the block that has the id.
    if (def.blocks.some((b) => b.block_id === bid)) fe.push({ path: "/block_id", message: `A block called “${bid}” already exists: choose another id, such as “${freeId(def, type)}”.` });
    setErrs(fe);
    if (fe.length) return;
    const ops: Op[] = [{ operation_type: "add", block_id: bid, type, params }];
    if (from) ops.push({ operation_type: "connect", block_id: from, target_block_id: bid, ...(fromBlock?.type === "condition" ? { branch } : {}) });
    const r = await apply(ops, `add ${bid}`);
    if (r && !r.skipped_items.some((s) => s.operation_index === 0)) onDone(bid);
  };
  const onFix = async (s: Skipped, fixed: Op) => {
    const r = await apply(fixBatch(sent!, s, fixed), `add ${fixed.block_id}`);
    if (r && !r.skipped_items.some((x) => x.operation_index === 0)) onDone(fixed.block_id);
  };
  const notes = skipNotes(sent, (op) => op.operation_type === "add" || (op.operation_type === "connect" && skipped.length > 0), onFix, busy);
  for (const fe of errs) notes.byField.set(fe.path, [...(notes.byField.get(fe.path) || []), { message: fe.message }]);
  const idNotes = [...notes.rest, ...(notes.byField.get("/block_id") || [])];
  return (
    <form class="add" onSubmit={submit} data-testid="add-form" aria-label={`Add a ${conn.title} block`}>
      <h2>Add: {conn.title} <small><code>{conn.type}</code></small></h2>
      <p class="desc">{conn.description}</p>
      <div class="field"><label for="add-id">Block id<span class="req" aria-hidden="true">*</span></label>
        <input id="add-id" value={bid} required pattern="[A-Za-z0-9_\-]{1,64}" title="1 to 64 letters, digits, _ or -" onInput={(e) => setBid((e.target as HTMLInputElement).value)} />
        <small class="desc">Other blocks read its output as <code>steps.{bid || "id"}.output</code>.</small>
      </div>
      {conn.category !== "trigger" && (
        <div class="field"><label for="add-after">After</label>
          <select id="add-after" value={from} onChange={(e) => setFrom((e.target as HTMLSelectElement).value)}>
            <option value="">(not connected yet)</option>
            {def.blocks.map((b) => <option key={b.block_id} value={b.block_id}>{b.block_id}</option>)}
          </select>
          {fromBlock?.type === "condition" && (
            <label class="inline-label">branch <select value={branch} onChange={(e) => setBranch((e.target as HTMLSelectElement).value)} aria-label="Branch of the condition"><option>true</option><option>false</option></select></label>
          )}
        </div>
      )}
      <Notes notes={idNotes} />
      <SchemaForm fields={fields} raw={raw} onRaw={setRaw} idp="add" base="/params" notes={notes.byField} refs={refs} oneOf={oneOfRequired(conn.params)} />
      <div class="actions">
        <button type="submit" disabled={busy}>Add block</button>
        <button type="button" class="ghost" onClick={() => { setType(""); setQ(""); }}>Another type</button>
        <button type="button" class="ghost" onClick={onCancel}>Cancel</button>
      </div>
    </form>
  );
}

// defaults are the texts a new block's form starts with: each field's schema default.
function defaults(fields: ReturnType<typeof fieldsOf>): Raw {
  const v: Record<string, unknown> = {};
  for (const f of fields) if (f.schema.default !== undefined) v[f.name] = f.schema.default;
  return toRaw(fields, v);
}

// BlockPanel shows a block: its settings (saved as one update of the params changed), its
// connections, rename and remove, and its problems on the fields they name.
function BlockPanel({ block, def, cat, verrs, sent, apply, rename: renameTo, busy, onRenamed, onRemoved, onConnect }: {
  block: Block; def: Definition; cat: Map<string, Connector>; verrs: VError[]; sent: Sent | null; apply: Apply; busy: boolean;
  rename: (from: string, to: string) => Promise<boolean>;
  onRenamed: (id: string) => void; onRemoved: () => void; onConnect: () => void;
}) {
  const conn = cat.get(block.type);
  const fields = useMemo(() => (conn ? fieldsOf(conn.params) : []), [conn]);
  const [raw, setRaw] = useState<Raw>(() => toRaw(fields, block.params || {}));
  const [errs, setErrs] = useState<FieldError[]>([]);
  const [newId, setNewId] = useState(block.block_id);
  const [idErr, setIdErr] = useState("");
  const [target, setTarget] = useState("");
  const [branch, setBranch] = useState("true");
  const params = block.params || {};
  // Params the catalog does not list (a type that left it) are kept as they are.
  const known = new Set(fields.map((f) => f.name));
  const save = async (e: Event) => {
    e.preventDefault();
    const fe: FieldError[] = [];
    const next = fromRaw(fields, raw, "/params", fe);
    setErrs(fe);
    if (fe.length) return;
    for (const [k, v] of Object.entries(params)) if (!known.has(k)) next[k] = v;
    const changed = paramChanges(params, next);
    if (Object.keys(changed).length === 0) return;
    await apply([{ operation_type: "update", block_id: block.block_id, params: changed }], `change ${block.block_id}`);
  };
  const rename = async (e: Event) => {
    e.preventDefault();
    const to = newId.trim();
    setIdErr("");
    if (!to || to === block.block_id) return;
    if (def.blocks.some((b) => b.block_id === to)) { setIdErr(`A block called “${to}” already exists: choose another id.`); return; }
    if (await renameTo(block.block_id, to)) onRenamed(to);
  };
  const remove = async () => {
    if (!confirm(`Remove block “${block.block_id}” and its connections?`)) return;
    const r = await apply([{ operation_type: "remove", block_id: block.block_id }], `remove ${block.block_id}`);
    if (r && r.skipped_items.length === 0) onRemoved();
  };
  const connect = async (e: Event) => {
    e.preventDefault();
    if (!target) return;
    await apply([{ operation_type: "connect", block_id: block.block_id, target_block_id: target, ...(block.type === "condition" ? { branch } : {}) }], `connect ${block.block_id} to ${target}`);
    setTarget("");
  };
  const notes = skipNotes(sent, (op) => op.operation_type === "update" && op.block_id === block.block_id,
    (s, fixed) => apply(fixBatch(sent!, s, fixed), `change ${block.block_id}`), busy);
  for (const fe of errs) notes.byField.set(fe.path, [...(notes.byField.get(fe.path) || []), { message: fe.message }]);
  const blockNotes: FieldNote[] = [...notes.rest];
  for (const v of verrs) {
    const fix = fixValidation(def, v);
    const note: FieldNote = {
      message: plainMessage(v),
      fix: fix ? <button class="fix" disabled={busy} data-testid="did-you-mean" onClick={() => apply([fix], `fix ${block.block_id}`)}>Use “{cut(String(v.did_you_mean), 60)}”</button> : undefined,
    };
    const parts = v.pointer ? pointerParts(v.pointer) : [];
    if (parts[0] === "params" && parts.length >= 2 && known.has(parts[1])) {
      const key = "/params/" + parts[1];
      notes.byField.set(key, [...(notes.byField.get(key) || []), note]);
    } else blockNotes.push(note);
  }
  const out = def.edges.filter((e) => e.block_id === block.block_id), into = def.edges.filter((e) => e.target_block_id === block.block_id);
  const others = def.blocks.filter((b) => b.block_id !== block.block_id && !out.some((e) => e.target_block_id === b.block_id));
  return (
    <div class="block-panel" data-testid="block-panel" data-block={block.block_id}>
      <h2>{block.block_id} <small>{conn?.title ?? block.type} · <code>{block.type}</code></small></h2>
      {conn && <p class="desc">{conn.description}</p>}
      {!conn && <p class="error">The block type {block.type} is not in the catalog any more: this block cannot run. Remove it or replace it.</p>}
      <Notes notes={blockNotes} />
      {fields.length > 0 && (
        <form onSubmit={save} aria-label={`Settings of ${block.block_id}`}>
          <SchemaForm fields={fields} raw={raw} onRaw={setRaw} idp={`b-${block.block_id}`} base="/params" notes={notes.byField}
            refs={refsFor(def, cat, block.block_id)} oneOf={oneOfRequired(conn!.params)} />
          <button type="submit" disabled={busy}>Save settings</button>
        </form>
      )}
      <h3>Connections</h3>
      {into.length > 0 && <p class="hint">After {into.map((e, i) => <span key={e.block_id}>{i > 0 && ", "}<b>{e.block_id}</b>{e.branch && ` (${e.branch})`}</span>)}.</p>}
      {out.length > 0 ? (
        <ul class="edges">
          {out.map((e) => (
            <li key={e.target_block_id}>→ <b>{e.target_block_id}</b>{e.branch && <> on <b class={`branch-${e.branch}`}>{e.branch}</b></>}
              {block.type === "condition" && (
                <button class="ghost" disabled={busy} onClick={() => apply([
                  { operation_type: "disconnect", block_id: e.block_id, target_block_id: e.target_block_id },
                  { operation_type: "connect", block_id: e.block_id, target_block_id: e.target_block_id, branch: e.branch === "true" ? "false" : "true" },
                ], `make ${e.block_id} → ${e.target_block_id} the ${e.branch === "true" ? "false" : "true"} branch`)}>Make it {e.branch === "true" ? "false" : "true"}</button>
              )}
              <button class="ghost" disabled={busy} onClick={() => apply([{ operation_type: "disconnect", block_id: e.block_id, target_block_id: e.target_block_id }], `disconnect ${e.block_id} from ${e.target_block_id}`)}
                aria-label={`Disconnect ${e.block_id} from ${e.target_block_id}`}>Disconnect</button>
            </li>
          ))}
        </ul>
      ) : <p class="hint">Nothing follows it yet.</p>}
      {others.length > 0 && (
        <form class="inline" onSubmit={connect}>
          <label for="connect-to">Then</label>
          <select id="connect-to" value={target} onChange={(e) => setTarget((e.target as HTMLSelectElement).value)}>
            <option value="">choose a block…</option>
            {others.map((b) => <option key={b.block_id} value={b.block_id}>{b.block_id}</option>)}
          </select>
          {block.type === "condition" && <select value={branch} onChange={(e) => setBranch((e.target as HTMLSelectElement).value)} aria-label="Branch"><option>true</option><option>false</option></select>}
          <button type="submit" disabled={busy || !target}>Connect</button>
          <button type="button" class="ghost" onClick={onConnect}>Pick on the graph</button>
        </form>
      )}
      <h3>Block</h3>
      {conn && (
        <form class="inline" onSubmit={rename}>
          <label for="rename-id">Id</label>
          <input id="rename-id" value={newId} pattern="[A-Za-z0-9_\-]{1,64}" title="1 to 64 letters, digits, _ or -" required aria-invalid={idErr ? "true" : undefined}
            onInput={(e) => { setNewId((e.target as HTMLInputElement).value); setIdErr(""); }} />
          <button type="submit" disabled={busy || newId.trim() === block.block_id}>Rename</button>
        </form>
      )}
      <Notes notes={idErr ? [{ message: idErr }] : []} />
      <button class="danger" onClick={remove} disabled={busy}>Remove block</button>
    </div>
  );
}

function EdgePanel({ edge, def, apply, busy, onRemoved }: { edge: { block_id: string; target_block_id: string; branch?: string }; def: Definition; apply: Apply; busy: boolean; onRemoved: () => void }) {
  const src = def.blocks.find((b) => b.block_id === edge.block_id);
  const setBranch = (b: string) => apply([
    { operation_type: "disconnect", block_id: edge.block_id, target_block_id: edge.target_block_id },
    { operation_type: "connect", block_id: edge.block_id, target_block_id: edge.target_block_id, branch: b },
  ], `make ${edge.block_id} → ${edge.target_block_id} the ${b} branch`);
  return (
    <div class="edge-panel" data-testid="edge-panel">
      <h2>{edge.block_id} → {edge.target_block_id}</h2>
      {src?.type === "condition" && (
        <div class="field"><label for="edge-branch">Branch</label>
          <select id="edge-branch" value={edge.branch || ""} disabled={busy} onChange={(e) => setBranch((e.target as HTMLSelectElement).value)}>
            {!edge.branch && <option value="">(none)</option>}<option>true</option><option>false</option>
          </select>
          <small class="desc">The connection is taken when the condition's result is this branch.</small>
        </div>
      )}
      <button class="danger" disabled={busy} onClick={async () => {
        const r = await apply([{ operation_type: "disconnect", block_id: edge.block_id, target_block_id: edge.target_block_id }], `disconnect ${edge.block_id} from ${edge.target_block_id}`);
        if (r && r.skipped_items.length === 0) onRemoved();
      }}>Remove connection</button>
    </div>
  );
}

// Problems lists the validation errors: what keeps the workflow from running, each on its
// block, with the fix the API offers.
function Problems({ verrs, def, apply, busy, onAddTrigger, onSelect }: { verrs: VError[]; def: Definition; apply: Apply; busy: boolean; onAddTrigger: (t: string) => void; onSelect: (id: string) => void }) {
  if (verrs.length === 0) return null;
  return (
    <div class="card problems" data-testid="problems">
      <h2>To fix before it can run</h2>
      <ul class="verrs">
        {verrs.map((e, i) => {
          const fix = fixValidation(def, e);
          return (
            <li key={i} data-code={e.code}>
              {e.block_id && <><button class="link" onClick={() => onSelect(e.block_id!)}>{e.block_id}</button>: </>}{plainMessage(e)}
              {fix && <> <button class="fix" disabled={busy} onClick={() => apply([fix], `fix ${e.block_id}`)}>Use “{cut(String(e.did_you_mean), 60)}”</button></>}
              {e.code === "no_trigger" && <> <button class="fix" onClick={() => onAddTrigger(e.did_you_mean || "trigger.manual")}>Add a trigger</button></>}
            </li>
          );
        })}
      </ul>
    </div>
  );
}

// RunBox starts a run. When the trigger declares an input_schema with fields, the input is a
// form generated from it (and a JSON view of the same value); the API's issues show on the
// fields they name.
function RunBox({ wf, trigger, runnable }: { wf: Workflow; trigger?: Block; runnable: boolean }) {
  const schema = trigger?.params?.input_schema as any;
  const fields = useMemo(() => (schema && typeof schema === "object" ? fieldsOf(schema) : []), [JSON.stringify(schema ?? null)]);
  const [mode, setMode] = useState<"form" | "json">(fields.length ? "form" : "json");
  const [raw, setRaw] = useState<Raw>({});
  const [json, setJson] = useState("{}");
  const [err, setErr] = useState<unknown>();
  const [notes, setNotes] = useState(new Map<string, FieldNote[]>());
  const [busy, setBusy] = useState(false);
  useEffect(() => setMode(fields.length ? "form" : "json"), [fields.length]);
  const value = (fe: FieldError[]) => (mode === "form" ? fromRaw(fields, raw, "/input", fe) : parseJSON(json, "The input", {}));
  const toJson = () => {
    const fe: FieldError[] = [];
    const v = fromRaw(fields, raw, "/input", fe);
    setJson(JSON.stringify(v, null, 2));
    setMode("json");
  };
  const toForm = () => {
    try {
      const v = parseJSON(json, "The input", {}) as any;
      setRaw(toRaw(fields, v && typeof v === "object" ? v : {}));
      setMode("form");
      setErr(undefined);
    } catch (x) { setErr(x); }
  };
  const start = async (e: Event) => {
    e.preventDefault();
    setErr(undefined);
    const fe: FieldError[] = [];
    let input: unknown;
    try { input = value(fe); } catch (x) { setErr(x); return; }
    const byField = new Map<string, FieldNote[]>();
    for (const f of fe) byField.set(f.path, [{ message: f.message }]);
    setNotes(byField);
    if (fe.length) return;
    setBusy(true);
    try {
      const r = await post<{ runId: string }>(`/api/workflows/${wf.id}/run`, { input });
      navigate(`/runs/${r.runId}`);
    } catch (x) {
      setBusy(false);
      // Issues at a field of the form show on it; the error box lists every issue by field.
      const m = new Map<string, FieldNote[]>();
      const issues = fieldErrors(x, "/input");
      if (mode === "form") {
        for (const is of issues) {
          const name = pointerParts(is.path)[0];
          if (name !== undefined && fields.some((f) => f.name === name)) {
            const k = `/input/${name}`;
            m.set(k, [...(m.get(k) || []), { message: words(is.message) }]);
          }
        }
      }
      setNotes(m);
      const onFields = [...m.values()].reduce((n, ns) => n + ns.length, 0);
      setErr(onFields > 0 && onFields === fieldErrors(x).length ? new Error("The input does not match the trigger's input schema: see the fields marked.") : x);
    }
  };
  return (
    <form class="card runbox" onSubmit={start} aria-label="Start a run">
      <h2>Start a run</h2>
      {fields.length > 0 && (
        <div class="tabs" role="group" aria-label="Input as">
          <button type="button" class={mode === "form" ? "tab on" : "tab"} aria-pressed={mode === "form"} onClick={toForm}>Form</button>
          <button type="button" class={mode === "json" ? "tab on" : "tab"} aria-pressed={mode === "json"} onClick={toJson}>JSON</button>
        </div>
      )}
      {mode === "form" && fields.length > 0
        ? <SchemaForm fields={fields} raw={raw} onRaw={setRaw} idp="run" base="/input" notes={notes} />
        : <div class="field"><label for="run-input">Input (JSON)</label><textarea id="run-input" class="code" rows={4} value={json} spellcheck={false} onInput={(e) => setJson((e.target as HTMLTextAreaElement).value)} /></div>}
      <ErrorBox err={err} />
      <div class="actions">
        <button type="submit" disabled={!runnable || busy}>Start run</button>
        <A href={`/runs?workflowId=${wf.id}`}>Runs of this workflow</A>
        <A href={`/schedules?new=${wf.id}`}>Schedule it</A>
      </div>
      {!runnable && <p class="hint">{wf.definition?.blocks?.length ? "Fix the problems listed above to run it." : "Add a trigger and the blocks that follow it to run it."}</p>}
    </form>
  );
}


