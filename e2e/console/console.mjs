// Drives the web console in headless chromium (playwright-core): e2e/console_test.go runs it
// against a system of its own. Every wait is on a state the page shows; the one pause, at the
// end, gives a late request (a throttled read, a reconnect) the time to be counted.
// Env: BASE_URL, CHROMIUM (executable), SHOTS (directory for the screenshots), EMAIL; and the
// organization console_test.go seeded with many runs: SEED_EMAIL, SEED_PASSWORD, SEED_KEY (an
// API key of it: another principal than its user), SEED_WORKFLOW (a workflow that sleeps eight
// times, then waits for the signal "go"), SEED_RUNS (how many runs it holds).
import { chromium } from "playwright-core";

const base = process.env.BASE_URL, shots = process.env.SHOTS, email = process.env.EMAIL;
const step = (s) => console.log(`step: ${s}`);

// Every page is watched: a page error fails the test, and so does a 429 the browser gets (the
// rate limit is the default one) where none is provoked. guarded counts the requests that take
// a rate-limit token (every /api/ path but the open /api/auth/*).
const pageErrors = [];
const watch = (page) => {
  const w = { guarded: [], limited: [] };
  page.setDefaultTimeout(30_000);
  page.on("dialog", (d) => d.accept()); // the confirmations of cancel, signal and revoke
  page.on("pageerror", (e) => {
    console.log(`pageerror: ${e.message}`);
    pageErrors.push(e.message);
  });
  page.on("request", (r) => {
    const u = new URL(r.url());
    if (u.pathname.startsWith("/api/") && !u.pathname.startsWith("/api/auth/")) w.guarded.push(`${r.method()} ${u.pathname}${u.search}`);
  });
  page.on("response", (r) => {
    if (r.status() === 429) w.limited.push(`${r.request().method()} ${r.url()}`);
  });
  return w;
};
const check = (w) => {
  if (pageErrors.length) throw new Error(`page errors: ${pageErrors.join("; ")}`);
  if (w.limited.length) throw new Error(`the browser got 429 rate_limited: ${w.limited.join(", ")}`);
};

// withKey calls the API as the seeded organization's key (not the browser's user).
const withKey = async (method, path, data) => {
  const resp = await fetch(base + path, {
    method, headers: { "X-Api-Key": process.env.SEED_KEY, "Content-Type": "application/json" },
    body: data === undefined ? undefined : JSON.stringify(data),
  });
  const text = await resp.text();
  if (!resp.ok) throw new Error(`${method} ${path}: ${resp.status} ${text}`);
  return JSON.parse(text);
};

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM, headless: true, args: ["--no-sandbox"] });
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
  const first = watch(page);

  step("sign up");
  await page.goto(base + "/");
  await page.getByRole("link", { name: "Create an account" }).click();
  await page.getByLabel("Name").fill("Console Tester");
  await page.getByLabel("Email").fill(email);
  await page.getByLabel("Password").fill("console-password-1");
  await page.getByRole("button", { name: "Sign up" }).click();
  await page.getByText("No workflows yet").waitFor();

  step("create a workflow through the API (with the page's session)");
  const definition = {
    blocks: [
      { block_id: "start", type: "trigger.manual" },
      { block_id: "check", type: "condition", params: { expression: "input.n > 5" } },
      { block_id: "flaky", type: "fail", params: { message: "first try fails", fail_attempts: 1 } },
      { block_id: "hold", type: "wait", params: { signal: "go", timeout: "10m" } },
      { block_id: "done", type: "log", params: { message: "done {{ input.n }}" } },
      { block_id: "small", type: "log", params: { message: "small" } },
    ],
    edges: [
      { block_id: "start", target_block_id: "check" },
      { block_id: "check", target_block_id: "flaky", branch: "true" },
      { block_id: "check", target_block_id: "small", branch: "false" },
      { block_id: "flaky", target_block_id: "hold" },
      { block_id: "hold", target_block_id: "done" },
    ],
  };
  const created = await page.request.post(base + "/api/workflows", { data: { name: "console-demo", definition } });
  if (created.status() !== 201) throw new Error(`create workflow: ${created.status()} ${await created.text()}`);
  const wf = await created.json();

  step("open it: the graph");
  await page.goto(base + "/workflows");
  await page.getByRole("link", { name: "console-demo" }).click();
  const graph = page.getByTestId("graph");
  await graph.waitFor();
  for (const b of ["start", "check", "flaky", "hold", "done", "small"]) await graph.locator(`[data-block="${b}"]`).waitFor();
  await graph.locator("text.branch", { hasText: "true" }).waitFor();
  await graph.locator("text.branch", { hasText: "false" }).waitFor();
  await page.screenshot({ path: `${shots}/console-graph.png`, fullPage: true });

  step("start a run from the page and watch its attempts arrive");
  await page.getByLabel("Run input").fill('{"n": 7}');
  await page.getByRole("button", { name: "Start run" }).click();
  await page.waitForURL(/\/runs\/run_/);
  const runURL = page.url();
  const timeline = page.getByTestId("timeline");
  await timeline.locator('[data-status="failed"]').first().waitFor(); // flaky #1, retried
  await timeline.locator('[data-status="succeeded"]').nth(2).waitFor(); // start, check, flaky #2
  await page.getByTestId("waiting").filter({ hasText: "signal go" }).waitFor();
  await page.locator("h1 .status").filter({ hasText: "waiting" }).waitFor();

  step("send the signal from the page");
  await page.getByLabel("Signal name").fill("go");
  await page.getByLabel("Signal payload").fill('{"ok": true}');
  await page.getByRole("button", { name: "Send signal" }).click();
  await page.locator("h1 .status").filter({ hasText: "completed" }).waitFor();
  await timeline.locator('[data-status="succeeded"]').nth(4).waitFor(); // + hold, done
  if (page.url() !== runURL) throw new Error("the run page reloaded");
  await page.screenshot({ path: `${shots}/console-run.png`, fullPage: true });

  step("cancel another run from the page");
  const started = await page.request.post(base + `/api/workflows/${wf.id}/run`, { data: { input: { n: 9 } } });
  const { runId } = await started.json();
  await page.goto(base + "/runs");
  await page.locator(`tr[data-run="${runId}"]`).getByRole("link").click();
  await page.locator("h1 .status").filter({ hasText: "waiting" }).waitFor();
  await page.getByRole("button", { name: "Cancel run" }).click();
  await page.locator("h1 .status").filter({ hasText: "cancelled" }).waitFor();

  step("the runs list follows the organization's stream");
  await page.goto(base + "/runs?status=cancelled");
  await page.locator(`tr[data-run="${runId}"]`).waitFor();

  step("create and revoke an API key");
  await page.getByRole("link", { name: "API keys" }).click();
  await page.getByText("No API keys").waitFor();
  await page.getByLabel("Key name").fill("ci-key");
  await page.getByRole("button", { name: "Create key" }).click();
  const raw = (await page.getByTestId("raw-key").locator("code").textContent()).trim();
  if (!raw.startsWith("svc_")) throw new Error(`raw key: ${raw}`);
  const row = page.locator("tr", { hasText: "ci-key" });
  await row.getByRole("button", { name: "Revoke" }).click();
  await row.waitFor({ state: "detached" });
  console.log(`revoked: ${raw}`); // the Go test checks the gateway refuses it

  check(first);
  console.log(`requests: ${first.guarded.length} guarded requests in the first part`);

  step("a 429 is shown with the contract's message, and the read is sent again after retryAfterMs");
  // The user's bucket is emptied from outside the page (page.request shares its session), and
  // kept empty until the page shows the wait.
  const spend = () => page.request.get(base + "/api/workflows?limit=1");
  while ((await spend()).status() !== 429);
  let burning = true;
  const burn = (async () => { while (burning) await spend(); })().catch(() => {});
  await page.getByRole("link", { name: "Workflows", exact: true }).click();
  const notice = page.getByTestId("rate-limited");
  await notice.filter({ hasText: "rate_limited" }).filter({ hasText: "Retrying in" }).waitFor();
  console.log(`shown: ${(await notice.textContent()).trim()}`);
  burning = false;
  await burn;
  await page.getByRole("link", { name: "console-demo" }).waitFor(); // the read, sent again
  await notice.waitFor({ state: "detached" });
  if (!first.limited.some((u) => u.includes("/api/workflows?limit=50"))) throw new Error(`the page's 429s: ${first.limited}`);
  first.limited.length = 0;

  step("sign out");
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.getByRole("button", { name: "Sign in" }).waitFor();
  check(first);

  step(`sign in to an organization of ${process.env.SEED_RUNS} runs (default rate limit)`);
  const ctx2 = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  const big = await ctx2.newPage();
  const bigW = watch(big), guarded = bigW.guarded;
  await big.goto(base + "/signin");
  await big.getByLabel("Email").fill(process.env.SEED_EMAIL);
  await big.getByLabel("Password").fill(process.env.SEED_PASSWORD);
  await big.getByRole("button", { name: "Sign in" }).click();
  await big.getByRole("link", { name: "console-live" }).waitFor();

  step("the runs page shows the first page, then loads more");
  await big.getByRole("link", { name: "Runs", exact: true }).click();
  const rows = big.locator("tr[data-run]");
  await rows.nth(49).waitFor();
  await big.getByTestId("count").filter({ hasText: "50 runs loaded" }).waitFor();
  if ((await rows.count()) !== 50) throw new Error(`first page: ${await rows.count()} rows`);
  await big.getByRole("button", { name: "Load more" }).click();
  await rows.nth(99).waitFor();
  await big.getByTestId("count").filter({ hasText: "100 runs loaded" }).waitFor();

  step("a run started meanwhile appears at the top and its status follows");
  const { runId: liveId } = await withKey("POST", `/api/workflows/${process.env.SEED_WORKFLOW}/run`, { input: {} });
  const liveRow = big.locator(`tr[data-run="${liveId}"]`);
  await liveRow.waitFor();
  if ((await rows.first().getAttribute("data-run")) !== liveId) throw new Error("the new run is not the first row");
  await liveRow.locator('[data-status="waiting"]').waitFor(); // its first sleep
  await liveRow.locator("td").nth(1).filter({ hasText: "console-live" }).waitFor();
  await liveRow.locator("td").nth(3).filter({ hasNotText: "—" }).waitFor(); // its creation time: the run read once
  if ((await rows.count()) !== 101) throw new Error(`after the new run: ${await rows.count()} rows`);

  step("its page follows it live");
  await liveRow.getByRole("link").click();
  await big.waitForURL(/\/runs\/run_/);
  const liveURL = big.url();
  const bars = big.getByTestId("timeline").locator("[data-attempt]");
  await big.locator("h1 .status").waitFor();
  await bars.first().waitFor();
  const barsAtOpen = await bars.count();
  await big.getByTestId("waiting").filter({ hasText: "signal go" }).waitFor({ timeout: 45_000 });
  const barsAtHold = await bars.count();
  if (barsAtHold <= barsAtOpen) throw new Error(`no attempt arrived while the page was open: ${barsAtOpen} then ${barsAtHold}`);
  await withKey("POST", `/api/runs/${liveId}/signals`, { name: "go" });
  await big.locator("h1 .status").filter({ hasText: "completed" }).waitFor();
  const doneRow = big.locator("table.attempts tr", { hasText: "done" });
  await doneRow.locator('[data-status="succeeded"]').waitFor();
  await doneRow.locator("summary").click();
  await doneRow.locator("pre.json").nth(1).filter({ hasText: "live done" }).waitFor(); // its output, from the logs
  if (big.url() !== liveURL) throw new Error("the run page reloaded");
  console.log(`attempts on the run page: ${barsAtOpen} when it opened, ${barsAtHold} at the signal wait, ${await bars.count()} at the end`);

  // Give a late reader (a throttled logs read, a reconnect) time to show itself.
  await big.waitForTimeout(3_000);
  check(bigW);
  console.log(`requests: ${guarded.length} guarded requests in the organization of ${process.env.SEED_RUNS} runs`);
  for (const r of guarded) console.log(`  ${r}`);
  const bound = 20;
  if (guarded.length > bound) throw new Error(`the console sent ${guarded.length} guarded requests (at most ${bound})`);
  await ctx2.close();
  console.log("ok");
} finally {
  await browser.close();
}
