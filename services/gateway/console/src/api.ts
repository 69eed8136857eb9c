// The public API, same origin: the session cookie travels with every request.
//
// Every guarded request takes a token from the bucket of (organization, principal): 60 a minute
// by default (gateway README, "Rate limit"). So the console never walks a whole list: it reads
// one page and the user asks for the next; it follows the event streams and applies their data
// instead of reading again; and a 429 is waited out (shown, then retried after retryAfterMs).

export class APIError extends Error {
  constructor(public status: number, public code: string, message: string, public body: unknown, public retryAfterMs?: number) {
    super(message);
  }
}

// --- the bucket, as the last answer's RateLimit-* headers describe it

const budget = { limit: 0, remaining: -1, at: 0 };

function noteBudget(h: Headers) {
  const limit = Number(h.get("RateLimit-Limit")), remaining = h.get("RateLimit-Remaining");
  if (limit > 0 && remaining !== null) {
    budget.limit = limit;
    budget.remaining = Number(remaining);
    budget.at = Date.now();
  }
}

// backgroundDelay is how long a read the user did not ask for (a refresh, a fill) should wait
// so that at least `reserve` tokens stay for what the user does next: 0 while the bucket holds
// more. The bucket refills one token every minute/limit.
export function backgroundDelay(reserve = 10): number {
  if (budget.remaining < 0 || budget.limit <= 0) return 0;
  const per = 60_000 / budget.limit;
  const have = budget.remaining + Math.floor((Date.now() - budget.at) / per);
  return have >= reserve ? 0 : (reserve - have) * per;
}

// --- rate-limit notices: what the page shows while a request waits out a 429

export interface RateNotice { code: string; message: string; until: number }
const waits = new Map<number, RateNotice>();
const listeners = new Set<(n: RateNotice | null) => void>();
let waitSeq = 0;

// current is the wait that ends last, or null when nothing waits.
function current(): RateNotice | null {
  let out: RateNotice | null = null;
  for (const n of waits.values()) if (!out || n.until > out.until) out = n;
  return out;
}
function publish() {
  const n = current();
  for (const l of listeners) l(n);
}

// onRateLimit calls f with the wait in progress (null once none is left); it returns the
// unsubscribe.
export function onRateLimit(f: (n: RateNotice | null) => void): () => void {
  listeners.add(f);
  f(current());
  return () => { listeners.delete(f); };
}

// waitOut shows n while it sleeps until n.until (or until signal aborts).
async function waitOut(n: RateNotice, signal?: AbortSignal) {
  const key = ++waitSeq;
  waits.set(key, n);
  publish();
  try {
    await sleep(n.until - Date.now(), signal);
  } finally {
    waits.delete(key);
    publish();
  }
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => { signal?.removeEventListener("abort", stop); resolve(); }, Math.max(0, ms));
    const stop = () => { clearTimeout(t); reject(signal!.reason); };
    signal?.addEventListener("abort", stop, { once: true });
  });
}

export const aborted = (x: unknown) => x instanceof DOMException && x.name === "AbortError";

// retryAfter is how long a 429 asks to wait: the body's retryAfterMs (the gateway's and the
// auth layer's), else Retry-After in seconds.
function retryAfter(resp: Response, data: any): number | undefined {
  if (data && typeof data.retryAfterMs === "number" && data.retryAfterMs > 0) return data.retryAfterMs;
  const s = Number(resp.headers.get("Retry-After"));
  return s > 0 ? s * 1000 : undefined;
}

// errorOf turns an error answer into an APIError carrying the API's error code ({error} for
// services, {code} for the auth layer), its message and, for a 429, the wait it asks for.
async function errorOf(resp: Response): Promise<APIError> {
  const text = await resp.text().catch(() => "");
  let data: any = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = text; }
  const code = (data && (data.error || data.code)) || `http_${resp.status}`;
  const message = (data && data.message) || code;
  return new APIError(resp.status, code, message, data, resp.status === 429 ? retryAfter(resp, data) : undefined);
}

// A 429 is retried this many times at most, and only when it asks for at most maxWait; past
// that the APIError reaches the page, which shows it.
const maxRetries = 4, maxWait = 60_000;

// call sends a request and returns its JSON; an error answer becomes an APIError. A 429 is
// shown (onRateLimit) and the request sent again once its retryAfterMs has passed: the gateway
// refuses it before any service sees it (and the auth layer refuses before it acts), so sending
// it again is safe for every method.
export async function call<T = any>(method: string, path: string, body?: unknown, signal?: AbortSignal, headers: Record<string, string> = {}): Promise<T> {
  const init: RequestInit = { method, credentials: "same-origin", headers: { ...headers }, signal };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    (init.headers as Record<string, string>)["Content-Type"] = "application/json";
  }
  for (let attempt = 0; ; attempt++) {
    const resp = await fetch(path, init);
    noteBudget(resp.headers);
    if (!resp.ok) {
      const err = await errorOf(resp);
      if (resp.status === 429 && err.retryAfterMs !== undefined && err.retryAfterMs <= maxWait && attempt < maxRetries) {
        await waitOut({ code: err.code, message: err.message, until: Date.now() + err.retryAfterMs }, signal);
        continue;
      }
      throw err;
    }
    const text = await resp.text();
    if (!text) return null as T;
    try {
      return JSON.parse(text) as T;
    } catch {
      return text as T;
    }
  }
}

export const get = <T = any>(p: string, signal?: AbortSignal) => call<T>("GET", p, undefined, signal);
export const post = <T = any>(p: string, b: unknown = {}) => call<T>("POST", p, b);

// Page is one page of a list (docs/API.md, "Pagination"): nextCursor is null after the last page.
export interface Page<T> { items: T[]; nextCursor: string | null }

// withQuery adds query parameters to a path (those with an empty value are left out).
export function withQuery(path: string, q: Record<string, string | number | null | undefined>): string {
  const u = new URLSearchParams(path.includes("?") ? path.slice(path.indexOf("?") + 1) : "");
  for (const [k, v] of Object.entries(q)) if (v !== null && v !== undefined && v !== "") u.set(k, String(v));
  const base = path.includes("?") ? path.slice(0, path.indexOf("?")) : path;
  const s = u.toString();
  return s ? `${base}?${s}` : base;
}

// --- Server-Sent Events over fetch
//
// EventSource cannot show why a stream was refused (a 429 closes it for good, silently) and
// reconnects on its own, each time spending a token. follow reads the stream with fetch
// instead: a refusal is an APIError (a 429 is shown and retried after its wait), and it
// reconnects only when the stream was cut, later each time it is cut again soon.

export interface FollowOptions {
  // resume sends the id of the last event received when it reconnects (?lastEventId=), so
  // the stream goes on after it (the run's stream); without it a reconnect starts afresh.
  resume?: boolean;
  // over reports that the stream ended for good (the run reached its final status): no reconnect.
  over?: () => boolean;
  // reopened is called each time the stream is open again after a cut.
  reopened?: () => void;
  // failed is called with an error answer that retrying will not mend (404, 401, 400); the
  // stream stops.
  failed?: (err: unknown) => void;
}

export function follow(path: string, on: (event: string, data: any) => void, opts: FollowOptions = {}): () => void {
  const ctl = new AbortController();
  let last = "", opened = 0, cuts = 0;
  const loop = async () => {
    while (!ctl.signal.aborted) {
      let wait: number;
      try {
        const url = opts.resume && last ? withQuery(path, { lastEventId: last }) : path;
        const resp = await fetch(url, { credentials: "same-origin", headers: { Accept: "text/event-stream" }, signal: ctl.signal });
        noteBudget(resp.headers);
        if (!resp.ok) {
          const err = await errorOf(resp);
          if (resp.status === 429) {
            // The rate limit (retryAfterMs) or the principal's open streams (maxStreams, no
            // wait given: one may close soon).
            await waitOut({ code: err.code, message: err.message, until: Date.now() + (err.retryAfterMs ?? 5_000) }, ctl.signal);
            continue;
          }
          if (resp.status < 500) {
            opts.failed?.(err);
            return;
          }
          wait = backoff(cuts++);
        } else {
          if (opened++ > 0) opts.reopened?.();
          const began = Date.now();
          await readEvents(resp.body!, (ev, id) => {
            if (id) last = id;
            let data: any = null;
            try { data = JSON.parse(ev.data); } catch { return; }
            // A failing handler must not pass for a cut stream: it is thrown on its own, as a
            // page error, and the stream goes on.
            try { on(ev.event, data); } catch (x) { setTimeout(() => { throw x; }); }
          });
          if (opts.over?.()) return;
          // A stream that lasted a while was cut by something passing (a restart, a proxy);
          // one cut at once again is failing: wait longer each time.
          cuts = Date.now() - began > 30_000 ? 0 : cuts + 1;
          wait = backoff(cuts);
        }
      } catch (x) {
        if (ctl.signal.aborted) return;
        wait = backoff(cuts++);
      }
      try { await sleep(wait, ctl.signal); } catch { return; }
    }
  };
  loop();
  return () => ctl.abort();
}

const backoff = (n: number) => Math.min(30_000, 1_000 * 2 ** Math.min(n, 5));

interface SSEvent { event: string; data: string }

// readEvents parses a text/event-stream body (the HTML Living Standard's rules, minus retry:)
// and calls emit for each event, with the stream's last id so far.
async function readEvents(body: ReadableStream<Uint8Array>, emit: (ev: SSEvent, id: string) => void) {
  const reader = body.getReader(), text = new TextDecoder();
  let buf = "", event = "", data: string[] = [], id = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += text.decode(value, { stream: true });
    let nl: number;
    while ((nl = buf.indexOf("\n")) >= 0) {
      let line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (line.endsWith("\r")) line = line.slice(0, -1);
      if (line === "") {
        if (data.length) emit({ event: event || "message", data: data.join("\n") }, id);
        event = "";
        data = [];
        continue;
      }
      if (line.startsWith(":")) continue; // a comment: the heartbeat
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let val = colon < 0 ? "" : line.slice(colon + 1);
      if (val.startsWith(" ")) val = val.slice(1);
      if (field === "event") event = val;
      else if (field === "data") data.push(val);
      else if (field === "id" && !val.includes("\0")) id = val;
    }
  }
}

// --- Throttle

// Throttle runs a task at most once per gap: kicks that come while it waits or runs fold into
// one later run. A soon kick (something the user waits for, a run's end) runs it after a short
// pause whatever the gap; other kicks also wait while the bucket runs low (backgroundDelay).
export class Throttle {
  private last = 0;
  private timer = 0;
  private due = 0;
  private running = false;
  private again: null | boolean = null;
  private stopped = false;

  constructor(private task: () => Promise<void>, private gap: number, private pause = 250) {}

  kick(soon = false) {
    if (this.stopped) return;
    if (this.running) {
      this.again = (this.again ?? false) || soon;
      return;
    }
    const now = Date.now();
    const due = soon ? now + this.pause : Math.max(now + this.pause, this.last + this.gap, now + backgroundDelay());
    if (this.timer && this.due <= due) return;
    clearTimeout(this.timer);
    this.due = due;
    this.timer = window.setTimeout(() => this.fire(), due - now);
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private async fire() {
    this.timer = 0;
    this.running = true;
    this.last = Date.now();
    try {
      await this.task();
    } catch {
      // the task reports its own errors
    } finally {
      this.running = false;
    }
    if (this.again !== null) {
      const soon = this.again;
      this.again = null;
      this.kick(soon);
    }
  }
}

// --- the API's shapes

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
  // Why a queued run waits: its workflow's concurrency limit, or a worker (its turn).
  queue?: null | { reason: "concurrency_limit" | "waiting_for_worker"; message: string };
  createdAt: string; startedAt: string | null; finishedAt: string | null;
  workflow?: { id: string; version: number; definition: Definition };
}
export interface Attempt {
  id: string; block_id: string; type: string; attempt: number; status: string;
  startedAt: string; finishedAt: string | null; durationMs: number | null;
  input?: unknown; output?: unknown; error: { message: string; code?: string } | null;
}

export interface Schedule {
  id: string; workflowId: string; cron: string; timezone: string; input: unknown; enabled: boolean;
  lastFiredAt: string | null; nextFireAt: string | null; createdAt: string; updatedAt: string;
}

export const finished = (s: string) => s === "completed" || s === "failed" || s === "cancelled";
export const attemptOver = (s: string) => s !== "running";
