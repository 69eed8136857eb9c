// Drives the auth layer (/api/auth/*) with the real better-auth client, configured the way a
// Node program without a cookie jar uses it: the bearer flow (the session token arrives in the
// `set-auth-token` response header and goes back as `Authorization: Bearer`), plus an `Origin`
// header on every request, with the organization and api-key client plugins.
//
//   BASE_URL=http://127.0.0.1:8080 ORIGIN=http://client.test node client-test.mjs
//
// Prints `ok <step>` per step and a closing `better-auth client: N passed, M failed`; stops at
// the first failure (exit 1), printing the HTTP exchange that failed. VERBOSE=1 prints every
// exchange. e2e/betterauth_test.go runs it against the whole system.
//
// Versions (package.json, exact): @better-auth/api-key 1.7.5 is the newest api-key plugin; it
// pins its peers better-call 1.4.0 and @better-auth/utils 0.4.2 exactly, and better-auth 1.7.7
// is the newest better-auth that depends on those same versions (1.7.9 on moves to newer ones,
// and npm refuses the mix). @better-auth/core is listed at better-auth's own version only so
// npm resolves the api-key plugin's core peer to it rather than to the newest core.
import { randomBytes } from "node:crypto";
import { createAuthClient } from "better-auth/client";
import { organizationClient } from "better-auth/client/plugins";
import { apiKeyClient } from "@better-auth/api-key/client";

const BASE_URL = (process.env.BASE_URL ?? "").replace(/\/+$/, "");
const ORIGIN = process.env.ORIGIN ?? "";
const VERBOSE = process.env.VERBOSE === "1";
const REQUEST_TIMEOUT_MS = 20_000;

if (!BASE_URL || !ORIGIN) {
  console.error("usage: BASE_URL=http://host:port ORIGIN=http://trusted.origin node client-test.mjs");
  process.exit(2);
}

// ---- the wire: every exchange is recorded, so a failure shows what was sent and answered ----

const exchanges = [];

function redact(name, value) {
  const n = name.toLowerCase();
  if (n === "authorization") return value.replace(/^(Bearer\s+)(.{0,6}).*$/i, "$1$2…");
  if (n === "x-api-key" || n === "set-auth-token") return value.slice(0, 8) + "…";
  return value;
}

function headerLines(headers) {
  const out = [];
  headers.forEach((v, k) => out.push(`    ${k}: ${redact(k, v)}`));
  return out.join("\n");
}

function formatExchange(x) {
  const lines = [`  > ${x.method} ${x.url}`, headerLines(x.reqHeaders)];
  if (x.reqBody) lines.push(`    body: ${x.reqBody.replace(/"password":"[^"]*"/g, '"password":"…"')}`);
  if (x.error) {
    lines.push(`  < (no response: ${x.error})`);
  } else {
    lines.push(`  < ${x.status}`, headerLines(x.resHeaders), `    body: ${x.resBody.trimEnd().slice(0, 2000)}`);
  }
  return lines.filter(Boolean).join("\n");
}

// recordingFetch is the client's fetch: the real one, with a timeout, keeping a copy of each
// exchange exactly as it went over the wire.
async function recordingFetch(input, init = {}) {
  const timeout = AbortSignal.timeout(REQUEST_TIMEOUT_MS);
  // AbortSignal.any is Node 20.3+; Debian's own nodejs is 18, where the caller's signal alone has to do.
  const signal = init.signal ? (AbortSignal.any ? AbortSignal.any([init.signal, timeout]) : init.signal) : timeout;
  const req = new Request(input, { ...init, signal });
  const x = {
    method: req.method,
    url: req.url,
    reqHeaders: new Headers(req.headers),
    reqBody: req.body ? await req.clone().text() : "",
  };
  exchanges.push(x);
  try {
    const res = await fetch(req);
    x.status = res.status;
    x.resHeaders = new Headers(res.headers);
    x.resBody = await res.clone().text();
    if (VERBOSE) console.log(formatExchange(x));
    return res;
  } catch (err) {
    x.error = String(err?.cause ?? err);
    if (VERBOSE) console.log(formatExchange(x));
    throw err;
  }
}

// ---- the client ----

let token = null; // the session token, as the server's set-auth-token header gave it
let tokenFromLastResponse = null;

const client = createAuthClient({
  baseURL: BASE_URL, // no path: the client appends its default basePath, /api/auth
  plugins: [organizationClient(), apiKeyClient()],
  fetchOptions: {
    customFetchImpl: recordingFetch,
    headers: { Origin: ORIGIN },
    auth: { type: "Bearer", token: () => token ?? undefined },
    onSuccess(ctx) {
      const t = ctx.response.headers.get("set-auth-token");
      tokenFromLastResponse = t;
      if (t) token = t;
    },
  },
});

// ---- steps ----

let passed = 0;

class StepFailure extends Error {}

function fail(msg) {
  throw new StepFailure(msg);
}

function check(cond, msg) {
  if (!cond) fail(msg);
}

function show(v) {
  try {
    return JSON.stringify(v);
  } catch {
    return String(v);
  }
}

// expectData unwraps a client result: {data, error} with error null and data not null.
function expectData(res) {
  check(res && typeof res === "object", `the client returned ${show(res)}, not {data, error}`);
  if (res.error) fail(`error ${show(res.error)}`);
  check(res.data !== null && res.data !== undefined, `data is ${show(res.data)}`);
  return res.data;
}

async function step(name, fn) {
  const before = exchanges.length;
  try {
    const note = await fn();
    passed++;
    console.log(`ok ${name}${note ? ` (${note})` : ""}`);
  } catch (err) {
    console.log(`FAIL ${name}: ${err instanceof StepFailure ? err.message : err?.stack ?? err}`);
    const mine = exchanges.slice(before);
    if (mine.length) {
      console.log("HTTP exchange(s) of this step:");
      for (const x of mine) console.log(formatExchange(x));
    } else {
      console.log("(the step made no HTTP request)");
    }
    console.log(`better-auth client: ${passed} passed, 1 failed`);
    process.exit(1);
  }
}

const suffix = randomBytes(6).toString("hex");
const email = `ba-${suffix}@client.test`;
const password = `pw-${randomBytes(12).toString("hex")}`;
const name = `Better Auth ${suffix}`;
const orgSlug = `ba-org-${suffix}`;

let personalOrgId;
let org;
let apiKey;
let firstToken;

await step("sign-up (signUp.email)", async () => {
  const data = expectData(await client.signUp.email({ email, password, name }));
  check(data.user?.email === email, `data.user.email is ${show(data.user?.email)}, want ${email}`);
  check(typeof data.user?.id === "string" && data.user.id, `data.user.id missing: ${show(data.user)}`);
  check(tokenFromLastResponse, `no set-auth-token response header (body token: ${show(data.token)}); the bearer flow needs it`);
  firstToken = token;
  return `user ${data.user.id}`;
});

await step("get-session (getSession)", async () => {
  const data = expectData(await client.getSession());
  check(data.user?.email === email, `data.user.email is ${show(data.user?.email)}, want ${email}`);
  check(data.session?.activeOrganizationId, `data.session.activeOrganizationId is ${show(data.session?.activeOrganizationId)}; sign-up should make the personal organization active`);
  personalOrgId = data.session.activeOrganizationId;
  return `active organization ${personalOrgId}`;
});

await step("organization create (organization.create)", async () => {
  const data = expectData(await client.organization.create({ name: `Org ${suffix}`, slug: orgSlug }));
  check(typeof data.id === "string" && data.id, `data.id missing: ${show(data)}`);
  check(data.slug === orgSlug, `data.slug is ${show(data.slug)}, want ${orgSlug}`);
  check(data.id !== personalOrgId, `the new organization has the personal organization's id ${data.id}`);
  org = data;
  return org.id;
});

await step("organization set-active (organization.setActive)", async () => {
  const data = expectData(await client.organization.setActive({ organizationId: org.id }));
  check(data.id === org.id, `data.id is ${show(data.id)}, want ${org.id}`);
});

await step("get-session shows the active organization", async () => {
  const data = expectData(await client.getSession());
  check(data.session?.activeOrganizationId === org.id, `data.session.activeOrganizationId is ${show(data.session?.activeOrganizationId)}, want ${org.id}`);
});

await step("organization list (organization.list)", async () => {
  const data = expectData(await client.organization.list());
  check(Array.isArray(data), `data is not an array: ${show(data)}`);
  const ids = data.map((o) => o?.id);
  check(ids.includes(personalOrgId), `the list ${show(ids)} lacks the personal organization ${personalOrgId}`);
  check(ids.includes(org.id), `the list ${show(ids)} lacks the new organization ${org.id}`);
  return `${data.length} organizations`;
});

await step("api-key create (apiKey.create)", async () => {
  const data = expectData(await client.apiKey.create({ name: `key-${suffix}` }));
  check(typeof data.key === "string" && data.key.startsWith("svc_"), `data.key is ${show(data.key && data.key.slice(0, 8) + "…")}, want a string starting with svc_`);
  check(typeof data.id === "string" && data.id, `data.id missing: ${show({ ...data, key: "…" })}`);
  check(data.referenceId === org.id, `data.referenceId is ${show(data.referenceId)}, want the active organization ${org.id}`);
  apiKey = data;
  return apiKey.id;
});

await step("the api key passes the gateway's guard (GET /api/connectors, x-api-key)", async () => {
  const res = await recordingFetch(`${BASE_URL}/api/connectors`, { headers: { "x-api-key": apiKey.key } });
  check(res.status !== 401 && res.status !== 403, `status ${res.status}: the guard refused a fresh key`);
  // 5xx: the guard could not resolve the key (identity unavailable), so it did not pass either.
  check(res.status < 500, `status ${res.status}: the request did not get through the guard`);
  return `status ${res.status}`;
});

await step("api-key list (apiKey.list)", async () => {
  const data = expectData(await client.apiKey.list());
  check(Array.isArray(data.apiKeys), `data is not {apiKeys:[...], total}: ${show(data)}`);
  check(typeof data.total === "number", `data.total is ${show(data.total)}, want a number`);
  check(data.apiKeys.some((k) => k?.id === apiKey.id), `the list lacks the key ${apiKey.id}: ${show(data.apiKeys.map((k) => k?.id))}`);
  for (const k of data.apiKeys) {
    check(!("key" in k), `key ${k.id} is listed with a "key" field${k.key === apiKey.key ? " holding the raw key" : ""}`);
  }
  return `${data.apiKeys.length} key(s), total ${data.total}`;
});

await step("api-key delete (apiKey.delete)", async () => {
  const data = expectData(await client.apiKey.delete({ keyId: apiKey.id }));
  check(data.success === true, `data is ${show(data)}, want {success:true}`);
});

await step("api-key list after delete", async () => {
  const data = expectData(await client.apiKey.list());
  check(Array.isArray(data.apiKeys), `data is not {apiKeys:[...], total}: ${show(data)}`);
  check(!data.apiKeys.some((k) => k?.id === apiKey.id), `the deleted key ${apiKey.id} is still listed`);
});

await step("sign-out (signOut)", async () => {
  const data = expectData(await client.signOut());
  check(data.success === true, `data is ${show(data)}, want {success:true}`);
});

await step("get-session after sign-out is empty", async () => {
  // The client still sends the old token: it must no longer resolve.
  const res = await client.getSession();
  check(res && typeof res === "object", `the client returned ${show(res)}`);
  if (res.error) return `error ${res.error.status}`;
  check(res.data === null, `data is ${show(res.data)}, want null: the revoked session still resolves`);
  return "null";
});

await step("sign-in (signIn.email)", async () => {
  const data = expectData(await client.signIn.email({ email, password }));
  check(data.user?.email === email, `data.user.email is ${show(data.user?.email)}, want ${email}`);
  check(tokenFromLastResponse, `no set-auth-token response header (body token: ${show(data.token)}); the bearer flow needs it`);
  check(token !== firstToken, "sign-in gave back the revoked session's token");
});

await step("get-session after sign-in", async () => {
  const data = expectData(await client.getSession());
  check(data.user?.email === email, `data.user.email is ${show(data.user?.email)}, want ${email}`);
  check(data.session?.userId === data.user.id, `data.session.userId is ${show(data.session?.userId)}, want ${data.user.id}`);
});

console.log(`better-auth client: ${passed} passed, 0 failed`);
