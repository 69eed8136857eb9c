// Drives the console's run retention (e2e/console_retention_test.go runs it against a system
// of its own) in headless chromium through playwright-core: the organization's settings as an
// owner (periods refused, set, reset), the retention on a finished run's page, and the same
// settings read-only for a member. Every wait is on a state the page shows or the API answers.
// Env: BASE_URL, CHROMIUM; OWNER_EMAIL, OWNER_PASSWORD (the organization's owner);
// MEMBER_EMAIL, MEMBER_PASSWORD (a member of it, who also has a personal organization);
// ORG_SLUG (the organization's slug); RUN_ID (a completed run of it).
import { chromium } from "playwright-core";
import { checkA11y } from "./axe.mjs";

const base = process.env.BASE_URL, runId = process.env.RUN_ID;
const step = (s) => console.log(`step: ${s}`);
const viewport = { width: 1280, height: 800 };
const DAY = 86_400_000;

// A page error fails the test; writes to the retention are recorded.
const pageErrors = [];
const watch = (page) => {
  const w = { puts: [] };
  page.setDefaultTimeout(30_000);
  page.on("pageerror", (e) => { console.log(`pageerror: ${e.message}`); pageErrors.push(e.message); });
  page.on("request", (r) => {
    if (r.method() !== "GET" && new URL(r.url()).pathname.endsWith("/retention")) w.puts.push(`${r.method()} ${r.postData()}`);
  });
  return w;
};

const signIn = async (page, email, password) => {
  await page.goto(base + "/signin");
  await page.getByLabel("Email").fill(email);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
};

// api reads the API with the page's session (page.request shares its cookies).
const api = async (page, path) => {
  const r = await page.request.get(base + path);
  if (r.status() !== 200) throw new Error(`GET ${path}: ${r.status()} ${await r.text()}`);
  return r.json();
};

// deletedAt checks the run page's deletion time: finishedAt + days, shown as the console
// shows dates (toLocaleString).
const deletedAt = async (page, finishedAt, days) => {
  const iso = new Date(Date.parse(finishedAt) + days * DAY).toISOString();
  const t = page.getByTestId("run-retention").getByTestId("deleted-at");
  await t.and(page.locator(`[datetime="${iso}"]`)).waitFor();
  const want = await page.evaluate((x) => new Date(x).toLocaleString(), iso);
  const got = (await t.textContent()).trim();
  if (got !== want) throw new Error(`deletion time shown "${got}", want "${want}"`);
  return got;
};

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM, headless: true, args: ["--no-sandbox"] });
try {
  const ctx = await browser.newContext({ viewport });
  const page = await ctx.newPage();
  const ownerW = watch(page);

  step("an owner opens the organization's settings: the server's period is in effect");
  await signIn(page, process.env.OWNER_EMAIL, process.env.OWNER_PASSWORD);
  await page.getByRole("link", { name: "kept-for-a-while" }).waitFor();
  await page.locator("nav").getByRole("link", { name: "Settings", exact: true }).click();
  await page.waitForURL(/\/organization$/);
  const ret = page.getByTestId("retention");
  const effective = ret.getByTestId("retention-effective"), own = ret.getByTestId("retention-own");
  await effective.filter({ hasText: "30 days" }).filter({ hasText: "the server's period" }).waitFor();
  await ret.getByTestId("retention-server").filter({ hasText: "30 days" }).filter({ hasText: "720h" }).waitFor();
  await own.filter({ hasText: "None: the server's period applies." }).waitFor();
  const reset = ret.getByRole("button", { name: "Use the server's period" });
  if (!(await reset.isDisabled())) throw new Error("reset is offered while the organization has no period of its own");
  await checkA11y(page, "settings, the server's period");

  step("periods the API refuses are said next to the field");
  const field = ret.getByLabel("Keep finished runs for");
  const fieldError = ret.locator("#retention-error");
  const refuse = async (typed, said) => {
    await field.fill(typed);
    await ret.getByRole("button", { name: "Save" }).click();
    await fieldError.filter({ hasText: said }).waitFor();
    if ((await field.getAttribute("aria-invalid")) !== "true") throw new Error(`"${typed}": the field is not marked invalid`);
    if (!(await field.getAttribute("aria-describedby")).split(" ").includes("retention-error")) throw new Error(`"${typed}": the message is not tied to the field`);
    const text = (await fieldError.textContent()).trim();
    if (/runRetention|invalid_body/.test(text)) throw new Error(`a machine name in the message: ${text}`);
    console.log(`shown: ${text}`);
  };
  await refuse("abc", 'The period "abc" is not a duration such as "168h", "90m" or "30d"');
  await checkA11y(page, "settings, a period refused");
  await refuse("31d", "The period must be at most the server's period, 720h");
  await refuse("30s", "The period must be at least 1m");
  await own.filter({ hasText: "None" }).waitFor(); // nothing changed
  // Typing again clears the message.
  await field.fill("3");
  await fieldError.waitFor({ state: "detached" });

  step("36h, then 7d: each shown in effect");
  const set = async (typed, shown, stored) => {
    await field.fill(typed);
    await ret.getByRole("button", { name: "Save" }).click();
    await effective.filter({ hasText: shown }).filter({ hasText: "this organization's period" }).waitFor();
    await own.filter({ hasText: shown }).filter({ hasText: stored }).waitFor();
    await ret.getByRole("status").filter({ hasText: `Saved: finished runs are kept for ${shown}.` }).waitFor();
    if ((await field.inputValue()) !== "") throw new Error("the field still holds what was saved");
    const r = await api(page, "/api/organizations/current/retention");
    if (r.runRetention !== stored || r.effectiveRetention !== stored) throw new Error(`after ${typed}: ${JSON.stringify(r)}`);
  };
  await set("36h", "36 hours", "36h");
  await set("7d", "7 days", "168h");
  if (await reset.isDisabled()) throw new Error("no reset while the organization has a period of its own");
  await checkA11y(page, "settings, the organization's period");

  step("a finished run's page: how long runs are kept, and when this one goes");
  const run = await api(page, `/api/runs/${runId}`);
  if (run.status !== "completed" || !run.finishedAt) throw new Error(`the run: ${JSON.stringify(run)}`);
  await page.locator("nav").getByRole("link", { name: "Runs", exact: true }).click();
  await page.locator(`tr[data-run="${runId}"]`).getByRole("link").click();
  await page.waitForURL(new RegExp(`/runs/${runId}$`));
  const sentence = page.getByTestId("run-retention");
  await sentence.filter({ hasText: "Finished runs are kept for 7 days (this organization's retention)." }).waitFor();
  console.log(`shown: ${(await sentence.textContent()).trim()}`);
  await deletedAt(page, run.finishedAt, 7);
  await checkA11y(page, "a run with its retention");
  // The same once the page is loaded afresh.
  await page.reload();
  await sentence.filter({ hasText: "Finished runs are kept for 7 days (this organization's retention)." }).waitFor();
  await deletedAt(page, run.finishedAt, 7);

  step("back to the server's period, from the run page's link");
  await sentence.getByRole("link", { name: "this organization's retention" }).click();
  await page.waitForURL(/\/organization$/);
  await reset.click();
  await effective.filter({ hasText: "30 days" }).filter({ hasText: "the server's period" }).waitFor();
  await own.filter({ hasText: "None: the server's period applies." }).waitFor();
  await ret.getByRole("status").filter({ hasText: "Back to the server's period: finished runs are kept for 30 days." }).waitFor();
  await reset.and(page.locator(":disabled")).waitFor();
  const after = await api(page, "/api/organizations/current/retention");
  if (after.runRetention !== null || after.effectiveRetention !== "720h") throw new Error(`after the reset: ${JSON.stringify(after)}`);
  await page.goBack();
  await page.waitForURL(new RegExp(`/runs/${runId}$`));
  await sentence.filter({ hasText: "Finished runs are kept for 30 days (the server's retention)." }).waitFor();
  await deletedAt(page, run.finishedAt, 30);
  const sent = ownerW.puts.map((p) => p.replace(/\s/g, ""));
  const want = ['PUT{"runRetention":"abc"}', 'PUT{"runRetention":"31d"}', 'PUT{"runRetention":"30s"}', 'PUT{"runRetention":"36h"}', 'PUT{"runRetention":"7d"}', 'PUT{"runRetention":null}'];
  if (JSON.stringify(sent) !== JSON.stringify(want)) throw new Error(`the changes sent: ${JSON.stringify(sent)}`);

  step("the settings at phone width (360 px): nothing scrolls sideways");
  await page.goto(base + "/organization");
  await effective.filter({ hasText: "30 days" }).waitFor();
  await page.setViewportSize({ width: 360, height: 740 });
  const wide = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  if (wide > 0) throw new Error(`the settings page is ${wide} px wider than the window at 360 px`);
  await checkA11y(page, "settings at 360 px");
  await ctx.close();

  step("a member sees the retention read-only");
  const mctx = await browser.newContext({ viewport });
  const mp = await mctx.newPage();
  const memberW = watch(mp);
  await signIn(mp, process.env.MEMBER_EMAIL, process.env.MEMBER_PASSWORD);
  // The member also has a personal organization: the console asks which one to open.
  // Both are named "Personal": the slug tells them apart.
  await mp.getByTestId("choose-organization").getByRole("listitem").filter({ hasText: process.env.ORG_SLUG }).getByRole("button").click();
  await mp.getByRole("link", { name: "kept-for-a-while" }).waitFor();
  await mp.locator("nav").getByRole("link", { name: "Settings", exact: true }).click();
  const mret = mp.getByTestId("retention");
  await mret.getByTestId("retention-effective").filter({ hasText: "30 days" }).waitFor();
  const readOnly = mret.getByTestId("retention-readonly");
  await readOnly.filter({ hasText: "Only owners and admins of this organization may change the retention period." }).filter({ hasText: "You are a member of it." }).waitFor();
  if (await mret.locator("input, form").count()) throw new Error("a member is offered a field to change the retention");
  if (await mret.getByRole("button").count()) throw new Error("a member is offered a button to change the retention");
  console.log(`shown: ${(await readOnly.textContent()).trim()}`);
  await checkA11y(mp, "settings, read-only for a member");
  await mp.goto(base + `/runs/${runId}`);
  await mp.getByTestId("run-retention").filter({ hasText: "Finished runs are kept for 30 days (the server's retention)." }).waitFor();
  await deletedAt(mp, run.finishedAt, 30);
  if (memberW.puts.length) throw new Error(`the member's pages sent changes: ${memberW.puts}`);
  await mctx.close();

  if (pageErrors.length) throw new Error(`page errors: ${pageErrors.join("; ")}`);
  console.log("ok");
} finally {
  await browser.close();
}
