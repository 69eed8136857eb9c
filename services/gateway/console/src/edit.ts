// The editor's model, without a page: the patch API's operations and answers, the fixes its
// hints offer, what a reload changed, the values a block's templates can reach, and the ops
// that rename a block. Every change the editor makes is a batch of these ops sent to
// POST /api/workflows/:id/operations.

import type { Block, Definition, Edge } from "./api";
import { type Connector, type Ref, keysOf, memberPath, pathsOf, pointerParts, setAt } from "./schema";

export interface Op {
  operation_type: "add" | "update" | "remove" | "connect" | "disconnect";
  block_id: string;
  type?: string;
  params?: Record<string, unknown>;
  target_block_id?: string;
  branch?: string;
}

export interface Hint { did_you_mean?: unknown; allowed?: unknown[]; pointer?: string }
export interface Problem { reason_code: string; reason: string; hint?: Hint }
export interface Skipped extends Problem { operation_index: number; operation_type: string; block_id: string; problems?: Problem[] }
export interface VError { code: string; block_id?: string; message: string; pointer?: string; did_you_mean?: string; no_incoming_edge?: string[] }
export interface OpsResult { ok: boolean; version: number; validation_errors: VError[]; skipped_items: Skipped[]; summary: string }

// Sent is a batch and what became of it: the skipped items point into ops.
export interface Sent { ops: Op[]; result: OpsResult; what: string }

// plain says what a skip means in a sentence a person reads; the API's reason (written for a
// program to repair with) stays available beside it.
export function plain(s: Problem, op: Op | undefined): string {
  const id = op?.block_id ?? "", to = op?.target_block_id ?? "";
  const param = s.hint?.pointer?.startsWith("/params/") ? pointerParts(s.hint.pointer)[1] : "";
  switch (s.reason_code) {
    case "invalid_block_id": return `“${id}” cannot be a block id: use 1 to 64 letters, digits, _ or -.`;
    case "duplicate_block_id": return `A block called “${id}” already exists: choose another id.`;
    case "block_type_not_registered": return `There is no block type “${op?.type ?? ""}”.`;
    case "hidden_param_in_input": return `“${param}” is set by the server, never in a workflow: leave it out.`;
    case "unknown_param": return `This block has no setting “${param}”.`;
    case "invalid_param": {
      // The reason ends with what the rule wants: "… is invalid at /params/x: must be <= 9 (rule: maximum)."
      const m = /is invalid at \S+: (.*?) \(rule: [^)]*\)/.exec(s.reason) || /are invalid: (.*?) \(rule: [^)]*\)/.exec(s.reason);
      const why = m ? `: ${m[1]}` : "";
      return param ? `“${param}” is not valid${why}.` : `These settings are not valid${why}.`;
    }
    case "block_not_found": return `There is no block “${id}” (any more): someone may have removed it.`;
    case "invalid_edge_source": return `There is no block “${id}” to connect from.`;
    case "invalid_edge_target": return `There is no block “${to}” to connect to.`;
    case "self_loop": return "A block cannot lead to itself.";
    case "duplicate_edge": return `“${id}” already leads to “${to}”.`;
    case "edge_creates_cycle": return `Connecting “${id}” to “${to}” would make a loop; a workflow runs one way.`;
    case "invalid_branch": return op?.branch ? `“${op.branch}” is not a branch of “${id}”.` : `A connection from the condition “${id}” needs a branch: true or false.`;
    case "edge_not_found": return `“${id}” does not lead to “${to}”.`;
  }
  return "This change was not applied.";
}

// plainMessage is a validation error's message for a person: without the location it starts
// with (the page shows the block and the field) and without the repair sentence written for a
// program (the page offers it as a button).
export function plainMessage(e: VError): string {
  let m = e.message.replace(/^Block "[^"]*"(, \/[^:]*)?: /, "").replace(/\s*Repaired, .*\(did_you_mean\)\.\s*$/, "");
  m = m.trim();
  return m ? m[0].toUpperCase() + m.slice(1) : e.message;
}

// problemsOf is every problem of a skipped op, its own first.
export const problemsOf = (s: Skipped): Problem[] => (s.problems && s.problems.length ? s.problems : [s]);

// fixOp is op with problem p repaired to value: a misspelt param renamed, a hidden param
// dropped, else value set at the hint's pointer. null when the hint points nowhere.
export function fixOp(op: Op, p: Problem, value: unknown): Op | null {
  const ptr = p.hint?.pointer;
  if (!ptr) return null;
  const parts = pointerParts(ptr);
  if (parts[0] === "params" && parts.length === 2 && (p.reason_code === "unknown_param" || p.reason_code === "hidden_param_in_input")) {
    const params = { ...(op.params || {}) };
    const v = params[parts[1]];
    delete params[parts[1]];
    if (p.reason_code === "unknown_param") {
      if (typeof value !== "string" || !value) return null;
      params[value] = v;
    }
    return { ...op, params };
  }
  if (parts.length === 0) return null;
  return setAt(op, parts, value);
}

// fixBatch is what sending a fix means: the fixed op, and the skipped connects of the same
// batch that named its block (they failed because the block did not exist yet).
export function fixBatch(sent: Sent, s: Skipped, fixed: Op): Op[] {
  const out = [fixed];
  const was = sent.ops[s.operation_index]?.block_id;
  if (fixed.operation_type === "add" && was !== undefined) {
    // The connects named the block by the id it was sent with; the fix may have changed it.
    const rename = (id: string | undefined) => (id === was ? fixed.block_id : id);
    for (const o of sent.result.skipped_items) {
      const op = sent.ops[o.operation_index];
      if (o !== s && op?.operation_type === "connect" && (op.block_id === was || op.target_block_id === was)) {
        out.push({ ...op, block_id: rename(op.block_id)!, target_block_id: rename(op.target_block_id) });
      }
    }
  }
  return out;
}

// fixValidation is the update that sets a validation error's did_you_mean at its pointer into
// the block ("/params/url"): the whole top-level param is sent (update merges params by
// key). null when there is nothing to set.
export function fixValidation(def: Definition, e: VError): Op | null {
  if (!e.block_id || !e.pointer || e.did_you_mean === undefined) return null;
  const parts = pointerParts(e.pointer);
  if (parts[0] !== "params" || parts.length < 2) return null;
  const b = def.blocks.find((x) => x.block_id === e.block_id);
  if (!b) return null;
  const key = parts[1];
  return { operation_type: "update", block_id: b.block_id, params: { [key]: setAt((b.params || {})[key], parts.slice(2), e.did_you_mean) } };
}

// canonical is JSON with every object's keys sorted: the API stores params with sorted keys,
// the page holds them in the order they were typed.
export const canonical = (v: unknown): string => JSON.stringify(v, (_k, x) =>
  x && typeof x === "object" && !Array.isArray(x) ? Object.fromEntries(Object.keys(x).sort().map((k) => [k, x[k]])) : x);

const edgeKey = (e: Edge) => `${e.block_id}→${e.target_block_id}${e.branch ? `:${e.branch}` : ""}`;

// changes lists, in words, what differs between the definition held and the one read again.
export function changes(held: Definition, now: Definition): string[] {
  const out: string[] = [];
  const before = new Map(held.blocks.map((b) => [b.block_id, b])), after = new Map(now.blocks.map((b) => [b.block_id, b]));
  for (const [id, b] of after) {
    const o = before.get(id);
    if (!o) out.push(`block “${id}” (${b.type}) was added`);
    else if (o.type !== b.type) out.push(`block “${id}” became a ${b.type}`);
    else if (canonical(o.params ?? {}) !== canonical(b.params ?? {})) out.push(`the settings of “${id}” changed`);
  }
  for (const id of before.keys()) if (!after.has(id)) out.push(`block “${id}” was removed`);
  const eb = new Set(held.edges.map(edgeKey)), ea = new Set(now.edges.map(edgeKey));
  for (const e of now.edges) if (!eb.has(edgeKey(e))) out.push(`“${e.block_id}” now leads to “${e.target_block_id}”${e.branch ? ` (${e.branch})` : ""}`);
  for (const e of held.edges) if (!ea.has(edgeKey(e))) out.push(`“${e.block_id}” no longer leads to “${e.target_block_id}”${e.branch ? ` (${e.branch})` : ""}`);
  return out;
}

// upstream is every block a path of edges leads from to id, nearest first.
export function upstream(def: Definition, id: string): string[] {
  const into = new Map<string, string[]>();
  for (const e of def.edges) (into.get(e.target_block_id) || into.set(e.target_block_id, []).get(e.target_block_id)!).push(e.block_id);
  const seen = new Set<string>([id]), out: string[] = [];
  const queue = [id];
  for (let i = 0; i < queue.length; i++) {
    for (const p of into.get(queue[i]) || []) {
      if (!seen.has(p)) { seen.add(p); out.push(p); queue.push(p); }
    }
  }
  return out;
}

const isTrigger = (b: Block, cat: Map<string, Connector>) => cat.get(b.type)?.category === "trigger" || b.type.startsWith("trigger.");
export const triggerOf = (def: Definition, cat: Map<string, Connector>) => def.blocks.find((b) => isTrigger(b, cat));

// refsFor lists what a template in block id may read: the run input (its fields from the
// trigger's input_schema), the outputs of the blocks upstream (their fields from the
// connector's output_schema; a transform's from its value, a trigger's from its
// input_schema), the run's and the workflow's id. extra are blocks to count as upstream too
// (the block a new one is added after).
export function refsFor(def: Definition, cat: Map<string, Connector>, id: string, extra: string[] = []): Ref[] {
  const refs: Ref[] = [];
  const trig = triggerOf(def, cat);
  const inputSchema = trig?.params?.input_schema as any;
  refs.push({ expr: "input", from: "run input" });
  for (const p of pathsOf(inputSchema, 2)) refs.push({ expr: memberPath("input", p.path), from: "run input", type: p.type });
  const ups = [...new Set([...extra.flatMap((x) => [x, ...upstream(def, x)]), ...upstream(def, id)])];
  for (const u of ups) {
    const b = def.blocks.find((x) => x.block_id === u);
    if (!b) continue;
    const from = `${u} (${cat.get(b.type)?.title ?? b.type})`, base = memberPath("steps", `${u}`) + ".output";
    refs.push({ expr: base, from });
    const fields = isTrigger(b, cat) ? pathsOf(inputSchema, 2) : b.type === "transform" ? keysOf(b.params?.value) : pathsOf(cat.get(b.type)?.output_schema);
    for (const p of fields) refs.push({ expr: memberPath(base, p.path), from, type: p.type });
  }
  refs.push({ expr: "run.id", from: "run" }, { expr: "workflow.id", from: "run" });
  return refs;
}

// renameOps renames block from to `to` in two batches: first the block added again under its
// new id with its edges made again; then, only once that applied, references to it in other
// blocks' params rewritten and the old block removed (its edges go with it). Sent as one batch,
// an add the API skipped would still remove the block.
export function renameOps(def: Definition, from: string, to: string): { first: Op[]; then: Op[] } {
  const b = def.blocks.find((x) => x.block_id === from);
  if (!b) return { first: [], then: [] };
  const first: Op[] = [{ operation_type: "add", block_id: to, type: b.type, params: b.params || {} }];
  for (const e of def.edges) {
    if (e.target_block_id === from) first.push({ operation_type: "connect", block_id: e.block_id, target_block_id: to, ...(e.branch ? { branch: e.branch } : {}) });
    if (e.block_id === from) first.push({ operation_type: "connect", block_id: to, target_block_id: e.target_block_id, ...(e.branch ? { branch: e.branch } : {}) });
  }
  const esc = from.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const re = new RegExp(`\\bsteps(\\.${esc}\\b|\\[\\s*"${esc}"\\s*\\]|\\[\\s*'${esc}'\\s*\\])`, "g");
  const newRef = /^[A-Za-z_][A-Za-z0-9_]*$/.test(to) ? `steps.${to}` : `steps[${JSON.stringify(to)}]`;
  const rewrite = (v: unknown): unknown =>
    typeof v === "string" ? v.replace(re, newRef)
      : Array.isArray(v) ? v.map(rewrite)
      : v && typeof v === "object" ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, rewrite(x)]))
      : v;
  const then: Op[] = [];
  for (const o of def.blocks) {
    if (o.block_id === from) continue;
    const changed: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(o.params || {})) {
      const w = rewrite(v);
      if (JSON.stringify(w) !== JSON.stringify(v)) changed[k] = w;
    }
    if (Object.keys(changed).length) then.push({ operation_type: "update", block_id: o.block_id, params: changed });
  }
  then.push({ operation_type: "remove", block_id: from });
  return { first, then };
}

// freeId is an unused block id for a new block of type t: "http_request", "http_request_2"…
export function freeId(def: Definition, t: string): string {
  const base = (t.replace(/^trigger\./, "") || "block").replace(/[^A-Za-z0-9_-]+/g, "_").slice(0, 56);
  const taken = new Set(def.blocks.map((b) => b.block_id));
  if (!taken.has(base)) return base;
  for (let i = 2; ; i++) if (!taken.has(`${base}_${i}`)) return `${base}_${i}`;
}

// paramChanges is the update that turns params `before` into `after`: keys set to their new
// value, keys gone set to null (update merges by key; null removes).
export function paramChanges(before: Record<string, unknown>, after: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(after)) if (JSON.stringify(v) !== JSON.stringify(before[k])) out[k] = v;
  for (const k of Object.keys(before)) if (!(k in after)) out[k] = null;
  return out;
}

// replay is the definition after a batch the API answered: the ops it did not skip, applied
// in order as the API applies them (add: its params without nulls; update: merged by key, a
// null removes; remove: the block and its edges; connect; disconnect). With If-Match the
// batch ran on exactly the definition held, so this is the stored definition, and the page
// need not read the workflow again (each read spends a rate-limit token).
export function replay(def: Definition, ops: Op[], skipped: Skipped[]): Definition {
  const skip = new Set(skipped.map((s) => s.operation_index));
  let blocks = def.blocks.map((b) => ({ ...b })), edges = [...def.edges];
  const clean = (p: Record<string, unknown> = {}) => Object.fromEntries(Object.entries(p).filter(([, v]) => v !== null));
  ops.forEach((op, i) => {
    if (skip.has(i)) return;
    switch (op.operation_type) {
      case "add": blocks.push({ block_id: op.block_id, type: op.type!, params: clean(op.params) }); break;
      case "update":
        blocks = blocks.map((b) => (b.block_id === op.block_id ? { ...b, params: clean({ ...(b.params || {}), ...(op.params || {}) }) } : b));
        break;
      case "remove":
        blocks = blocks.filter((b) => b.block_id !== op.block_id);
        edges = edges.filter((e) => e.block_id !== op.block_id && e.target_block_id !== op.block_id);
        break;
      case "connect": edges.push({ block_id: op.block_id, target_block_id: op.target_block_id!, ...(op.branch ? { branch: op.branch } : {}) }); break;
      case "disconnect": edges = edges.filter((e) => !(e.block_id === op.block_id && e.target_block_id === op.target_block_id)); break;
    }
  });
  return { blocks, edges };
}
