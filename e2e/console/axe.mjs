// checkA11y runs axe-core (pinned in package.json) over a page as it stands and throws when it
// finds a violation of impact "serious" or "critical", naming each rule, what it asks for and
// the first elements it found. console.mjs calls it on every page it visits; editor.mjs may
// import it too. The script runs beside an installed node_modules (console_test.go copies the
// .mjs files next to it), where axe-core resolves.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const axePath = createRequire(import.meta.url).resolve("axe-core/axe.min.js");
let axeSource = null;

// The impacts that fail a page; "moderate" and "minor" are reported by axe but pass here.
const failing = new Set(["serious", "critical"]);

// inject puts axe on the page once. addScriptTag adds an inline script, which the console's
// Content-Security-Policy (script-src 'self') refuses; then the same source is evaluated
// through the DevTools protocol, which the policy does not govern.
async function inject(page) {
  if (await page.evaluate(() => typeof window.axe === "object")) return;
  try {
    await page.addScriptTag({ path: axePath });
  } catch {
    // refused by the page's CSP: evaluated below
  }
  if (await page.evaluate(() => typeof window.axe === "object")) return;
  axeSource ??= readFileSync(axePath, "utf8");
  await page.evaluate(axeSource);
  if (!(await page.evaluate(() => typeof window.axe === "object"))) throw new Error("axe-core could not be loaded into the page");
}

// checkA11y(page, label, opts): label names the page in the error and the log line; opts.exclude
// lists CSS selectors axe should leave out (nothing in the console needs it today).
export async function checkA11y(page, label, opts = {}) {
  await inject(page);
  const found = await page.evaluate(async ({ exclude, impacts }) => {
    const context = exclude && exclude.length ? { include: [["html"]], exclude: exclude.map((s) => [s]) } : document;
    const r = await window.axe.run(context, { resultTypes: ["violations"] });
    return r.violations
      .filter((v) => impacts.includes(v.impact))
      .map((v) => ({
        id: v.id, impact: v.impact, help: v.help, count: v.nodes.length,
        nodes: v.nodes.slice(0, 4).map((n) => `${n.target.join(" ")}${n.failureSummary ? ` (${n.failureSummary.replace(/\s*\n\s*/g, " ")})` : ""}`),
      }));
  }, { exclude: opts.exclude ?? [], impacts: [...failing] });
  if (found.length) {
    const said = found.map((v) => `${v.impact} ${v.id}: ${v.help} [${v.count}] ${v.nodes.join("; ")}`).join("\n  ");
    throw new Error(`accessibility (axe-core) on ${label}:\n  ${said}`);
  }
  console.log(`a11y: ${label}: no serious or critical violation`);
}
