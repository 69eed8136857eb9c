// Records in dist/SOURCE_HASH the hash of the sources the build was made from; console_test.go
// computes the same hash and fails when the committed dist/ is stale. Keep sourceHash in step
// with sourceFiles/sourceHash in console.go.
import { createHash } from "node:crypto";
import { readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";

const root = new URL("..", import.meta.url).pathname;
const files = ["index.html", "package.json", "package-lock.json", "tsconfig.json", "vite.config.ts"];
const walk = (dir) => {
  for (const name of readdirSync(join(root, dir))) {
    const p = join(dir, name);
    if (statSync(join(root, p)).isDirectory()) walk(p);
    else files.push(relative(root, join(root, p)));
  }
};
walk("src");
walk("public"); // copied as they are into dist/ (the favicon)
files.sort();
const h = createHash("sha256");
for (const f of files) {
  h.update(f + "\0");
  h.update(readFileSync(join(root, f)));
  h.update("\0");
}
writeFileSync(join(root, "dist", "SOURCE_HASH"), h.digest("hex") + "\n");
