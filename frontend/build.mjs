// Builds the flow editor (src/) and the CodeMirror 6 packages it imports into one file in the
// app's static files, so no page loads code from elsewhere: `bash scripts/build_editor.sh`.
// The banner names the sources' digest; tests/flows_data/test_editor_bundle.py checks that the
// committed file was built from the sources beside it.
import {createHash} from "node:crypto";
import {readFileSync, readdirSync, writeFileSync, mkdirSync} from "node:fs";
import {dirname, join, resolve} from "node:path";
import {fileURLToPath} from "node:url";
import * as esbuild from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const out = resolve(process.argv[2] || join(here, "..", "falai_django", "static", "falai_django"));

export function sourceDigest() {
  const files = ["build.mjs", "package.json", "package-lock.json",
    ...readdirSync(join(here, "src")).filter((f) => f.endsWith(".js")).sort().map((f) => `src/${f}`)];
  const hash = createHash("sha256");
  for (const file of files) {
    hash.update(file + "\0");
    hash.update(readFileSync(join(here, file)));
    hash.update("\0");
  }
  return hash.digest("hex");
}

const lock = JSON.parse(readFileSync(join(here, "package-lock.json"), "utf8"));
const bundled = Object.entries(lock.packages)
  .filter(([path]) => path.startsWith("node_modules/") && !path.includes("esbuild"))
  .map(([path, info]) => [path.slice("node_modules/".length), info.version]);

mkdirSync(out, {recursive: true});
await esbuild.build({
  entryPoints: [join(here, "src", "flow_editor.js")],
  bundle: true,
  minify: true,
  format: "iife",
  target: ["es2020"],
  legalComments: "none",
  outfile: join(out, "flow_editor.js"),
  banner: {js: `/* falai_django flow editor: frontend/src with ${bundled.map(([n, v]) => `${n}@${v}`).join(", ")}` +
    ` (MIT, see flow_editor.LICENSES.txt). Source digest ${sourceDigest()}. Built by scripts/build_editor.sh. */`},
});
const licenses = bundled.map(([name, version]) => {
  const dir = join(here, "node_modules", name);
  const file = readdirSync(dir).find((f) => /^licen[sc]e/i.test(f));
  return `${name}@${version}\n\n${file ? readFileSync(join(dir, file), "utf8").trim() : "(no license file)"}\n`;
});
writeFileSync(join(out, "flow_editor.LICENSES.txt"), licenses.join("\n" + "-".repeat(72) + "\n\n"));
console.log(`flow_editor.js built into ${out}`);
