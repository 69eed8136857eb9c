// The public API, same origin: the session cookie travels with every request.

export class APIError extends Error {
  constructor(public status: number, public code: string, message: string, public body: unknown) {
    super(message);
  }
}

// call sends a request and returns its JSON; an error answer becomes an APIError carrying the
// contract's code ({error} for services, {code} for the auth layer) and message.
export async function call<T = any>(method: string, path: string, body?: unknown): Promise<T> {
  const init: RequestInit = { method, credentials: "same-origin", headers: {} };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    (init.headers as Record<string, string>)["Content-Type"] = "application/json";
  }
  const resp = await fetch(path, init);
  const text = await resp.text();
  let data: any = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = text;
    }
  }
  if (!resp.ok) {
    const code = (data && (data.error || data.code)) || `http_${resp.status}`;
    const message = (data && data.message) || code;
    throw new APIError(resp.status, code, message, data);
  }
  return data as T;
}

export const get = <T = any>(p: string) => call<T>("GET", p);
export const post = <T = any>(p: string, b: unknown = {}) => call<T>("POST", p, b);

// all reads every page of a list endpoint.
export async function all<T = any>(path: string, key = "items"): Promise<T[]> {
  const out: T[] = [];
  let after: string | null = null;
  for (let i = 0; i < 100; i++) {
    const sep = path.includes("?") ? "&" : "?";
    const page: any = await get(path + (after ? `${sep}after=${encodeURIComponent(after)}` : ""));
    const items: T[] = page[key] || [];
    out.push(...items);
    if (!page.nextCursor || items.length === 0) break;
    after = page.nextCursor;
  }
  return out;
}

export interface Block { block_id: string; type: string; params?: Record<string, unknown> }
export interface Edge { block_id: string; target_block_id: string; branch?: string }
export interface Definition { blocks: Block[]; edges: Edge[] }
export interface ValidationError { code: string; block_id?: string; message: string }
export interface Workflow {
  id: string; name: string; description?: string; version: number;
  definition?: Definition; validation_errors?: ValidationError[]; createdAt: string; updatedAt: string;
}
export interface Run {
  runId: string; workflowId: string; workflowVersion: number; status: string; input: unknown;
  output: unknown; error: { block_id?: string; message: string } | null;
  waiting: null | { block_id: string; kind: "sleep" | "signal"; until?: string; signal?: string };
  createdAt: string; startedAt: string | null; finishedAt: string | null;
  workflow?: { id: string; version: number; definition: Definition };
}
export interface Attempt {
  id: string; block_id: string; type: string; attempt: number; status: string;
  startedAt: string; finishedAt: string | null; durationMs: number | null;
  input: unknown; output: unknown; error: { message: string; code?: string } | null;
}

export const finished = (s: string) => s === "completed" || s === "failed" || s === "cancelled";
