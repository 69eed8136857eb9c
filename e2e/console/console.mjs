// Drives the web console in headless chromium (playwright-core): e2e/console_test.go runs it
// against a system of its own. Every wait is on a state the page shows; nothing sleeps.
// Env: BASE_URL, CHROMIUM (executable), SHOTS (directory for the screenshots), EMAIL.
import { chromium } from "playwright-core";

const base = process.env.BASE_URL, shots = process.env.SHOTS, email = process.env.EMAIL;
const step = (s) => console.log(`step: ${s}`);
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM, headless: true, args: ["--no-sandbox"] });
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
  page.setDefaultTimeout(30_000);
  page.on("dialog", (d) => d.accept()); // the confirmations of cancel, signal and revoke
  page.on("pageerror", (e) => console.log(`pageerror: ${e.message}`));

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

  step("sign out");
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.getByRole("button", { name: "Sign in" }).waitFor();
  console.log("ok");
} finally {
  await browser.close();
}
