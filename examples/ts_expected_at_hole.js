#!/usr/bin/env node
// TypeScript's expected type at holes ts-expected-types.js sampled, written two ways: without a
// place ("expected", as that tool writes it: `$ZodTypeDef`) and from the hole's own place
// ("expected_here": typeToString with the hole as its enclosing declaration, the names as the
// hole's file reaches them, `core.$ZodTypeDef` where the file imports `* as core`; also how
// quick info and signature help write types there, which write a name the file does not
// reach bare). Same program options as that tool.
//
// Usage: NODE_PATH=PREFIX/node_modules node examples/ts_expected_at_hole.js REPO HOLES.jsonl > OUT.jsonl
// (each line of HOLES.jsonl with "expected" re-read and "expected_here" added; then
// `typed_hole_agreement.py ... OUT.jsonl --at-hole` compares against "expected_here").
const fs = require("fs"), path = require("path"), ts = require("typescript");
const [repo, holes] = process.argv.slice(2);
const root = path.resolve(repo);
const rows = fs.readFileSync(holes, "utf8").trim().split("\n").map(JSON.parse);
const skip = new Set(["node_modules", "dist", "build", ".git", "coverage"]);
function walk(dir, out = []) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    if (skip.has(e.name)) continue;
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p, out);
    else if (/\.(ts|tsx)$/.test(e.name) && !e.name.endsWith(".d.ts") && fs.statSync(p).size < 1 << 20) out.push(p);
  }
  return out;
}
const program = ts.createProgram(walk(root).sort(), {
  target: ts.ScriptTarget.ESNext, module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext,
  strict: true, skipLibCheck: true, noEmit: true, jsx: ts.JsxEmit.Preserve, lib: ["lib.esnext.d.ts", "lib.dom.d.ts"],
});
const checker = program.getTypeChecker();
for (const h of rows) {
  const sf = program.getSourceFile(path.join(root, h.file));
  const at = sf.getPositionOfLineAndCharacter(h.line - 1, h.column - 1);
  let found;
  const visit = (n) => {
    if (n.getStart(sf) === at && n.getText(sf) === h.expr && ts.isExpression(n) && !found) found = n;
    if (n.pos <= at && at < n.end) ts.forEachChild(n, visit);
  };
  visit(sf);
  const t = found && checker.getContextualType(found);
  // As quick info and signature help write types (services' typeToDisplayParts): a name
  // the file does not reach is written bare, not as `import("...").Name`.
  const flags = ts.TypeFormatFlags.NoTruncation | ts.TypeFormatFlags.UseAliasDefinedOutsideCurrentScope;
  const bare = ts.TypeFormatFlags.NoTruncation;
  console.log(JSON.stringify({ ...h, expected: t ? checker.typeToString(t, undefined, bare) : null,
    expected_here: t ? checker.typeToString(t, found, flags) : null }));
}
