// Builds a workflow in the console's editor with the UI alone (e2e/console_editor_test.go
// runs it against a system of its own), in headless chromium through playwright-core. Every
// wait is on a state the page shows.
// Env: BASE_URL, CHROMIUM, SHOTS (directory for the screenshots), EMAIL, ECHO_URL (a local
// HTTP endpoint that answers JSON at once; the orchestrator may reach private addresses).
import { chromium } from "playwright-core";

const base = process.env.BASE_URL, shots = process.env.SHOTS, email = process.env.EMAIL, echo = process.env.ECHO_URL;
const step = (s) => console.log(`step: ${s}`);
const pageErrors = [];
import { checkA11y } from "./axe.mjs";

const a11y = (page, label) => checkA11y(page, label);

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM, headless: true, args: ["--no-sandbox"] });
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  page.setDefaultTimeout(30_000);
  page.on("pageerror", (e) => { console.log(`pageerror: ${e.message}`); pageErrors.push(e.message); });
  page.on("dialog", (d) => d.accept());
  // patches counts the batches the editor sends: each change is one request.
  const patches = [];
  let counting = true; // off while the script itself calls the API from the page
  page.on("request", (r) => {
    const u = new URL(r.url());
    if (counting && r.method() === "POST" && /^\/api\/workflows\/[^/]+\/operations$/.test(u.pathname)) patches.push({ ifMatch: r.headers()["if-match"], body: r.postDataJSON() });
  });

  step("sign up: an organization with no workflow");
  await page.goto(base + "/signup");
  await page.getByLabel("Name").fill("Editor Tester");
  await page.getByLabel("Email").fill(email);
  await page.getByLabel("Password").fill("editor-password-1");
  await page.getByRole("button", { name: "Sign up" }).click();
  await page.getByText("No workflows yet").waitFor();

  step("create a workflow from the list");
  await page.getByRole("link", { name: "New workflow" }).click();
  await page.getByLabel("Name").fill("order check");
  await page.getByLabel("Description").fill("Looks an order up and says what it found");
  await page.getByRole("button", { name: "Create workflow" }).click();
  await page.getByText("This workflow has no blocks yet").waitFor();
  const wfId = new URL(page.url()).pathname.split("/")[2];
  if (!/^wf_/.test(wfId)) throw new Error(`not on a workflow's page: ${page.url()}`);
  await a11y(page, "empty editor");

  const graph = page.getByTestId("edit-graph");
  const block = (id) => graph.locator(`[data-block="${id}"]`);
  const addForm = page.getByTestId("add-form");
  const addBlock = async (type, search, id) => {
    await page.getByRole("toolbar").getByRole("button", { name: "Add block" }).click();
    await page.getByLabel("Search block types").fill(search);
    await page.locator(`button.entry[data-type="${type}"]`).click();
    await addForm.getByLabel("Block id").fill(id);
  };
  const submitAdd = async (id) => {
    await addForm.getByRole("button", { name: "Add block" }).click();
    await block(id).waitFor();
    await page.getByTestId("block-panel").and(page.locator(`[data-block="${id}"]`)).waitFor();
    // The new block has the keyboard's focus.
    await page.waitForFunction((id) => document.activeElement?.closest?.(`[data-block="${id}"]`) != null, id);
  };

  step("a manual trigger with an input schema");
  await page.getByRole("button", { name: "Add a manual trigger" }).click();
  await addForm.getByLabel("Block id").fill("start");
  await addForm.getByLabel(/^Input schema/).fill(JSON.stringify({
    type: "object", required: ["order"],
    properties: { order: { type: "string", minLength: 1 }, qty: { type: "integer", minimum: 1 }, rush: { type: "boolean" }, channel: { enum: ["web", "phone"] } },
  }));
  await submitAdd("start");

  step("an http.request after it, its URL built with the template helper");
  await addBlock("http.request", "http", "fetch");
  if ((await addForm.getByLabel("After").inputValue()) !== "start") throw new Error("a new block does not follow the selected one");
  await addForm.getByLabel(/^Method/).selectOption("GET");
  await addForm.getByLabel(/^Url/).fill(`${echo}/orders/`);
  await addForm.getByLabel("Insert a value into Url").selectOption({ label: "input.order (string)" });
  if ((await addForm.getByLabel(/^Url/).inputValue()) !== `${echo}/orders/{{ input.order }}`) throw new Error(`url: ${await addForm.getByLabel(/^Url/).inputValue()}`);
  // hidden params never appear
  if (await addForm.locator('[data-field="allow_private_network"]').count()) throw new Error("a hidden param is on the form");
  await submitAdd("fetch");

  step("a condition on the response, and a transform on each branch");
  await addBlock("condition", "cond", "found");
  await addForm.getByLabel(/^Expression/).fill("");
  await addForm.getByLabel("Insert a value into Expression").selectOption({ label: "steps.fetch.output.status (integer)" });
  await addForm.getByLabel(/^Expression/).press("End");
  await addForm.getByLabel(/^Expression/).type(" == 200");
  await submitAdd("found");
  await addBlock("transform", "transform", "yes");
  await addForm.getByLabel("After").selectOption("found");
  await addForm.getByLabel("Branch of the condition").selectOption("true");
  await addForm.getByLabel(/^Value/).fill('{"order": "{{ input.order }}", "state": "found", "body": "{{ steps.fetch.output.body }}"}');
  await submitAdd("yes");

  step("a mistake on purpose: a transform that reads a block that does not exist");
  await addBlock("transform", "transform", "no");
  await addForm.getByLabel("After").selectOption("found");
  await addForm.getByLabel("Branch of the condition").selectOption("false");
  await addForm.getByLabel(/^Value/).fill('{"order": "{{ input.order }}", "status": "{{ steps.fetchh.output.status }}"}');
  await submitAdd("no");
  // The validation error shows on the block (outlined, a badge), on its field, and in the list;
  // its did_you_mean is a button.
  await graph.locator('[data-block="no"].invalid').waitFor();
  const problems = page.getByTestId("problems");
  await problems.locator('[data-code="unknown_reference"]').waitFor();
  const field = page.getByTestId("block-panel").locator('[data-field="value"]');
  await field.getByText("fetchh").first().waitFor();
  if (!(await page.getByRole("button", { name: "Start run" }).isDisabled())) throw new Error("a workflow with validation errors can be started");
  await page.screenshot({ path: `${shots}/console-editor-hint.png` });
  await field.getByTestId("did-you-mean").click();
  await problems.waitFor({ state: "detached" });
  await graph.locator('[data-block="no"].invalid').waitFor({ state: "detached" });
  const value = await page.getByTestId("block-panel").getByLabel(/^Value/).inputValue();
  if (!value.includes("steps.fetch.output.status")) throw new Error(`the fix did not land: ${value}`);

  step("a change the API skips shows on the field it names, and the form keeps what was typed");
  await block("fetch").locator(".body").click();
  await page.getByTestId("block-panel").getByLabel(/^Timeout ms/).fill("400000");
  await page.getByTestId("block-panel").getByRole("button", { name: "Save settings" }).click();
  const timeoutField = page.getByTestId("block-panel").locator('[data-field="timeout_ms"]');
  await timeoutField.locator(".field-notes").waitFor();
  await page.getByTestId("summary").getByText("not applied").waitFor();
  // A template stands for a number too, and stays as typed when another setting is saved.
  await page.getByTestId("block-panel").getByLabel(/^Timeout ms/).fill("{{ 5000 }}");
  await page.getByTestId("block-panel").getByRole("button", { name: "Save settings" }).click();
  await page.getByTestId("summary").getByText("Saved: change fetch").waitFor();
  await page.getByTestId("block-panel").getByLabel(/^Headers/).fill('{"X-Order": "{{ input.order }}"}');
  await Promise.all([
    page.waitForResponse((r) => r.request().method() === "POST" && r.url().endsWith("/operations")),
    page.getByTestId("block-panel").getByRole("button", { name: "Save settings" }).click(),
  ]);
  const stored = await page.evaluate(async (id) => (await (await fetch(`/api/workflows/${id}`)).json()).definition.blocks.find((b) => b.block_id === "fetch").params, wfId);
  if (stored.timeout_ms !== "{{ 5000 }}" || stored.headers?.["X-Order"] !== "{{ input.order }}") throw new Error(`fetch's params: ${JSON.stringify(stored)}`);

  step("connect (by keyboard) and disconnect on the graph; rename a block");
  // An id already taken is refused on the form, before anything is sent.
  const sentBefore = patches.length;
  await addBlock("log", "log", "fetch");
  await addForm.getByLabel(/^Message/).fill("noted");
  await addForm.getByRole("button", { name: "Add block" }).click();
  await addForm.getByText("A block called “fetch” already exists").waitFor();
  if (patches.length !== sentBefore) throw new Error("an add under a taken id was sent");
  await addForm.getByLabel("Block id").fill("note");
  await addForm.getByLabel("After").selectOption("");
  await addForm.getByLabel(/^Message/).fill("noted");
  await submitAdd("note");
  // With the keyboard: the handle, then the block that follows (both focusable, Enter acts).
  await graph.locator('[data-block="yes"] .handle').focus();
  await page.keyboard.press("Enter");
  await page.getByTestId("connecting").waitFor();
  await block("note").locator(".body").focus();
  await page.keyboard.press("Enter");
  await graph.locator('[data-edge="yes>note"]').waitFor();
  await graph.locator('[data-edge="yes>note"]').click();
  await page.getByTestId("edge-panel").getByRole("button", { name: "Remove connection" }).click();
  await graph.locator('[data-edge="yes>note"]').waitFor({ state: "detached" });
  await block("note").locator(".body").click();
  await page.getByTestId("block-panel").getByRole("button", { name: "Remove block" }).click();
  await block("note").waitFor({ state: "detached" });
  await block("yes").locator(".body").click();
  // A rename onto a taken id is refused, and the block stays.
  await page.getByTestId("block-panel").getByLabel("Id", { exact: true }).fill("no");
  await page.getByTestId("block-panel").getByRole("button", { name: "Rename" }).click();
  await page.getByTestId("block-panel").getByText("A block called “no” already exists").waitFor();
  await block("yes").waitFor();
  await page.getByTestId("block-panel").getByLabel("Id", { exact: true }).fill("found_it");
  await page.getByTestId("block-panel").getByRole("button", { name: "Rename" }).click();
  await block("found_it").waitFor();
  await graph.locator('[data-edge="found>found_it"]').waitFor();
  await page.getByTestId("problems").waitFor({ state: "detached", timeout: 1000 }).catch(() => {});
  if (await page.getByTestId("problems").count()) throw new Error(`problems after the rename: ${await page.getByTestId("problems").innerText()}`);
  await a11y(page, "editor");
  await page.screenshot({ path: `${shots}/console-editor.png` });

  step("start a run from the form generated from the input schema; an error names the field");
  const runBox = page.getByRole("form", { name: "Start a run" });
  await runBox.getByLabel(/^Order/).fill("A-17");
  await runBox.getByLabel(/^Qty/).fill("0");
  await runBox.getByLabel(/^Rush/).selectOption("true");
  await runBox.getByLabel(/^Channel/).selectOption({ label: "web" });
  await runBox.getByRole("button", { name: "Start run" }).click();
  await runBox.locator('[data-field="qty"] .field-notes').waitFor();
  await runBox.getByLabel(/^Qty/).fill("2");
  await runBox.getByRole("button", { name: "JSON" }).click();
  const asJson = JSON.parse(await runBox.getByLabel("Input (JSON)").inputValue());
  if (asJson.order !== "A-17" || asJson.qty !== 2 || asJson.rush !== true || asJson.channel !== "web") throw new Error(`the JSON view: ${JSON.stringify(asJson)}`);
  await runBox.getByRole("button", { name: "Form" }).click();
  await runBox.getByRole("button", { name: "Start run" }).click();
  await page.waitForURL(/\/runs\/run_/);
  await page.locator('h1 [data-status="completed"]').waitFor();
  const firstRun = new URL(page.url()).pathname.split("/")[2];
  const out1 = await page.evaluate(async (id) => (await (await fetch(`/api/runs/${id}`)).json()).output, firstRun);
  if (out1?.found_it?.state !== "found" || out1?.found_it?.order !== "A-17") throw new Error(`the run's output: ${JSON.stringify(out1)}`);

  step("a run waits; the workflow changes meanwhile; the run keeps its version");
  await page.goto(`${base}/workflows/${wfId}`);
  await block("found_it").locator(".body").click();
  await addBlock("wait", "wait", "hold");
  await addForm.getByLabel(/^Signal/).fill("go");
  await submitAdd("hold");
  await addBlock("transform", "transform", "last");
  await addForm.getByLabel(/^Value/).fill('{"v": "one"}');
  await submitAdd("last");
  const version = Number((await page.locator("h1 small").innerText()).match(/v(\d+)/)[1]);
  await runBox.getByLabel(/^Order/).fill("B-2");
  await runBox.getByRole("button", { name: "Start run" }).click();
  await page.waitForURL(/\/runs\/run_/);
  const waitingRun = new URL(page.url()).pathname.split("/")[2];
  await page.getByTestId("waiting").waitFor();
  await page.goto(`${base}/workflows/${wfId}`);
  await block("last").locator(".body").click();
  await page.getByTestId("block-panel").getByLabel(/^Value/).fill('{"v": "two"}');
  await page.getByTestId("block-panel").getByRole("button", { name: "Save settings" }).click();
  await page.getByTestId("summary").getByText("Saved").waitFor();
  await page.locator("h1 small", { hasText: `v${version + 1}` }).waitFor();

  step("someone else changes it too: the 412 lists the change and the edit applies again");
  counting = false;
  await page.evaluate(async ({ id, v }) => {
    const r = await fetch(`/api/workflows/${id}/operations`, {
      method: "POST", headers: { "Content-Type": "application/json", "If-Match": String(v) },
      body: JSON.stringify({ ops: [{ operation_type: "add", block_id: "elsewhere", type: "log", params: { message: "from another tab" } }] }),
    });
    if (!r.ok) throw new Error(`the other edit: ${r.status}`);
  }, { id: wfId, v: version + 1 });
  counting = true;
  await page.getByTestId("block-panel").getByLabel(/^Value/).fill('{"v": "three"}');
  await page.getByTestId("block-panel").getByRole("button", { name: "Save settings" }).click();
  const conflict = page.getByTestId("conflict");
  await conflict.getByText("block “elsewhere” (log) was added").waitFor();
  await conflict.getByRole("button", { name: "Reload and apply my change again" }).click();
  await block("elsewhere").waitFor();
  await page.locator("h1 small", { hasText: `v${version + 3}` }).waitFor();

  step("the waiting run goes on with the definition it started with");
  await page.goto(`${base}/runs/${waitingRun}`);
  await page.getByTestId("waiting").waitFor();
  await page.getByRole("button", { name: "Send signal" }).click();
  await page.locator('h1 [data-status="completed"]').waitFor();
  const run2 = await page.evaluate(async (id) => (await (await fetch(`/api/runs/${id}`)).json()), waitingRun);
  if (run2.output?.last?.v !== "one" || run2.workflowVersion !== version) throw new Error(`the waiting run: v${run2.workflowVersion} ${JSON.stringify(run2.output)}`);

  step("schedule it from its page");
  await page.goto(`${base}/workflows/${wfId}`);
  await page.getByRole("link", { name: "Schedule it" }).click();
  await page.waitForURL(/\/schedules/);
  await page.getByLabel("Cron").fill("0 9 * * 1");
  await page.getByTestId("next-fires").locator("time").first().waitFor();
  await page.getByRole("button", { name: "Create schedule" }).click();
  await page.locator(`[data-schedule]`, { hasText: "0 9 * * 1" }).waitFor();

  step("a hundred blocks stay usable");
  const ops = [{ operation_type: "add", block_id: "b0", type: "trigger.manual" }];
  for (let i = 1; i < 100; i++) {
    const cond = i % 10 === 1;
    ops.push({ operation_type: "add", block_id: `b${i}`, type: cond ? "condition" : "log", params: cond ? { expression: "input.n > 1" } : { message: `step ${i}` } });
  }
  // A chain with a condition every ten blocks whose false branch skips a block.
  for (let i = 1; i < 100; i++) {
    const from = i - 1, branch = from % 10 === 1 ? { branch: "true" } : {};
    ops.push({ operation_type: "connect", block_id: `b${from}`, target_block_id: `b${i}`, ...branch });
    if (i % 10 === 1 && i + 2 < 100) ops.push({ operation_type: "connect", block_id: `b${i}`, target_block_id: `b${i + 2}`, branch: "false" });
  }
  counting = false;
  const big = await page.evaluate(async (ops) => {
    const r = await fetch("/api/workflows", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ name: "a hundred blocks" }) });
    const w = await r.json();
    const p = await fetch(`/api/workflows/${w.id}/operations`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ ops }) });
    return { id: w.id, result: await p.json() };
  }, ops);
  counting = true;
  if (big.result.skipped_items?.length) throw new Error(`the big workflow: ${JSON.stringify(big.result.skipped_items.slice(0, 3))}`);
  const t0 = Date.now();
  await page.goto(`${base}/workflows/${big.id}`);
  await graph.locator('[data-block="b99"]').waitFor();
  console.log(`shown: 100 blocks in ${Date.now() - t0} ms`);
  // No two blocks overlap.
  const boxes = await graph.locator("[data-block]").evaluateAll((els) => els.map((e) => { const r = e.querySelector("rect").getBoundingClientRect(); return [e.dataset.block, r.x, r.y, r.width, r.height]; }));
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const [a, ax, ay, aw, ah] = boxes[i], [b, bx, by, bw, bh] = boxes[j];
    if (ax < bx + bw && bx < ax + aw && ay < by + bh && by < ay + ah) throw new Error(`blocks ${a} and ${b} overlap`);
  }
  await block("b99").locator(".body").scrollIntoViewIfNeeded();
  await block("b99").locator(".body").click();
  await page.getByTestId("block-panel").getByLabel(/^Message/).fill("the last step");
  await page.getByTestId("block-panel").getByRole("button", { name: "Save settings" }).click();
  await page.getByTestId("summary").getByText("Saved").waitFor();

  for (const p of patches) if (!/^"?\d+"?$/.test(p.ifMatch || "")) throw new Error(`a batch without If-Match: ${JSON.stringify(p)}`);
  console.log(`batches sent: ${patches.length}`);
  if (pageErrors.length) throw new Error(`page errors: ${pageErrors.join("; ")}`);
  console.log("ok");
} catch (e) {
  // What the page showed when it failed, for the log and the screenshots directory.
  for (const p of browser.contexts().flatMap((c) => c.pages())) {
    console.log(`failed on ${p.url()}`);
    await p.screenshot({ path: `${shots}/editor-failure.png`, fullPage: true }).catch(() => {});
    console.log((await p.locator("main").innerText().catch(() => "")).slice(0, 1500));
  }
  throw e;
} finally {
  await browser.close();
}
