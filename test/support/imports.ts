/**
 * Every module a source file names, found by the TypeScript parser rather than by a pattern: a
 * pattern cannot tell code from a comment or a string, and stops where a comment inside an
 * import list holds a `;`. Used by test/architecture.test.ts for the import directions, the
 * cycles and what production may import; the same parse serves .ts, .tsx, .mts, .cts, .js, .jsx,
 * .mjs and .cjs files (the file name picks the grammar).
 */
import ts from "typescript";

/**
 * How a module is named: `import` (static, `import type` and side-effect imports included, and
 * `import x = require("y")`), `export` (`export … from`), `dynamic` (`import("y")`), `require`
 * (`require("y")`, or a `createRequire(...)` result called), `resolve` (`require.resolve`,
 * `import.meta.resolve`: the module must exist), `type` (`import("y")` in a type position).
 */
export type ImportKind = "import" | "export" | "dynamic" | "require" | "resolve" | "type";

export interface ModuleReference {
  specifier: string;
  kind: ImportKind;
  /** 1-based line of the reference. */
  line: number;
}

/** A load whose module name is only known at run time, so no rule here can check it. */
export interface ComputedLoad {
  kind: "dynamic" | "require" | "worker";
  line: number;
  /** The argument as written (`pathToFileURL(entry).href`), or the whole call if it has none. */
  expression: string;
}

/**
 * A `new Worker(code, { eval: true })`: code run from a string, whose own imports are imports of
 * this file. `source` is the code when written in this file (a literal, or a `const` of this file
 * holding one), where to find it when imported (`{ specifier, name }`), or null when neither.
 */
export interface EvaluatedWorker {
  line: number;
  expression: string;
  source: { text: string } | { specifier: string; name: string } | null;
}

export interface FileImports {
  modules: ModuleReference[];
  computed: ComputedLoad[];
  workers: EvaluatedWorker[];
}

/** The text of a string or template literal; a template's `${…}` parts are left out (an empty comment). */
function literalText(node: ts.Node): string | undefined {
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) return node.text;
  if (ts.isTemplateExpression(node)) {
    return node.head.text + node.templateSpans.map((s) => `/**/${s.literal.text}`).join("");
  }
  return undefined;
}

/** A module name written so it can be read without running anything: a string, or a template without `${…}`. */
function staticName(node: ts.Node | undefined): string | undefined {
  if (node && (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node))) return node.text;
  return undefined;
}

function parse(fileName: string, text: string): ts.SourceFile {
  // No script kind given: TypeScript picks it from the extension (JSX allowed in .js, as Next does).
  return ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true);
}

/**
 * The modules `text` (the contents of `fileName`) names, the loads it computes, and the code it
 * evaluates in workers. Comments, strings and JSX text are never read as imports; JSDoc type
 * imports (`@type {import("x")}`) are comments too. `require` and `createRequire` are recognised
 * by name, not by scope: a local function called `require` counts as the real one.
 */
export function findImports(fileName: string, text: string): FileImports {
  const file = parse(fileName, text);
  const found: FileImports = { modules: [], computed: [], workers: [] };
  const lineOf = (node: ts.Node) => file.getLineAndCharacterOfPosition(node.getStart(file)).line + 1;
  const add = (node: ts.Node, specifier: string, kind: ImportKind) =>
    found.modules.push({ specifier, kind, line: lineOf(node) });

  // Names bound to `createRequire` (an import or a destructured require, aliases included) and to
  // what calling it returned (`const load = createRequire(base)`), collected before the walk
  // because a function may use one above the line that binds it.
  const createRequireNames = new Set(["createRequire"]);
  const requireNames = new Set(["require"]);
  // What each top-level identifier holds when it holds code or names an imported binding, for
  // the `new Worker(NAME, { eval: true })` that refers to it.
  const constants = new Map<string, string>();
  const imported = new Map<string, { specifier: string; name: string }>();

  const isCreateRequire = (callee: ts.Expression) =>
    (ts.isIdentifier(callee) && createRequireNames.has(callee.text)) ||
    (ts.isPropertyAccessExpression(callee) && callee.name.text === "createRequire");
  const isRequire = (callee: ts.Expression): boolean =>
    (ts.isIdentifier(callee) && requireNames.has(callee.text)) ||
    (ts.isCallExpression(callee) && isCreateRequire(callee.expression));

  const bind = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const bindings = node.importClause?.namedBindings;
      if (bindings && ts.isNamedImports(bindings)) {
        for (const el of bindings.elements) {
          const name = (el.propertyName ?? el.name).text;
          imported.set(el.name.text, { specifier: node.moduleSpecifier.text, name });
          if (name === "createRequire") createRequireNames.add(el.name.text);
        }
      }
    }
    if (ts.isVariableDeclaration(node) && node.initializer) {
      const init = node.initializer;
      if (ts.isIdentifier(node.name)) {
        if (ts.isCallExpression(init) && isCreateRequire(init.expression)) requireNames.add(node.name.text);
        const code = literalText(init);
        if (code !== undefined && node.parent.flags & ts.NodeFlags.Const) constants.set(node.name.text, code);
      } else if (ts.isObjectBindingPattern(node.name)) {
        for (const el of node.name.elements) {
          const key = el.propertyName ?? el.name;
          if (ts.isIdentifier(key) && key.text === "createRequire" && ts.isIdentifier(el.name)) {
            createRequireNames.add(el.name.text);
          }
        }
      }
    }
    ts.forEachChild(node, bind);
  };
  bind(file);

  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) {
      const name = staticName(node.moduleSpecifier);
      if (name !== undefined) add(node, name, ts.isImportDeclaration(node) ? "import" : "export");
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) {
      const name = staticName(node.moduleReference.expression);
      if (name !== undefined) add(node, name, "import");
    } else if (ts.isImportTypeNode(node)) {
      const arg = node.argument;
      const name = ts.isLiteralTypeNode(arg) ? staticName(arg.literal) : undefined;
      if (name !== undefined) add(node, name, "type");
    } else if (ts.isCallExpression(node)) {
      callOf(node);
    } else if (ts.isNewExpression(node)) {
      workerOf(node);
    }
    ts.forEachChild(node, visit);
  };

  const computed = (node: ts.CallExpression | ts.NewExpression, kind: ComputedLoad["kind"]) => {
    const arg = node.arguments?.[0];
    found.computed.push({ kind, line: lineOf(node), expression: (arg ?? node).getText(file) });
  };

  const callOf = (call: ts.CallExpression) => {
    const callee = call.expression;
    const first = call.arguments[0];
    if (callee.kind === ts.SyntaxKind.ImportKeyword) {
      const name = staticName(first);
      if (name !== undefined) add(call, name, "dynamic");
      else computed(call, "dynamic");
    } else if (isRequire(callee)) {
      const name = staticName(first);
      if (name !== undefined) add(call, name, "require");
      else computed(call, "require");
    } else if (ts.isPropertyAccessExpression(callee) && callee.name.text === "resolve") {
      const target = callee.expression;
      const onImportMeta = ts.isMetaProperty(target) && target.keywordToken === ts.SyntaxKind.ImportKeyword;
      if (!onImportMeta && !isRequire(target)) return;
      const name = staticName(first);
      if (name !== undefined) add(call, name, "resolve");
      else computed(call, "require");
    }
  };

  const workerOf = (node: ts.NewExpression) => {
    if (!ts.isIdentifier(node.expression) || node.expression.text !== "Worker") return;
    const options = node.arguments?.[1];
    const evaluated =
      options !== undefined &&
      ts.isObjectLiteralExpression(options) &&
      options.properties.some(
        (p) =>
          ts.isPropertyAssignment(p) &&
          p.name.getText(file) === "eval" &&
          p.initializer.kind !== ts.SyntaxKind.FalseKeyword,
      );
    if (!evaluated) return;
    const code = node.arguments?.[0];
    if (code === undefined) return computed(node, "worker");
    const literal = literalText(code);
    let source: EvaluatedWorker["source"] = null;
    if (literal !== undefined) source = { text: literal };
    else if (ts.isIdentifier(code)) {
      const constant = constants.get(code.text);
      source = constant !== undefined ? { text: constant } : (imported.get(code.text) ?? null);
    }
    found.workers.push({ line: lineOf(node), expression: code.getText(file), source });
  };

  visit(file);
  return found;
}

/**
 * The code held by a top-level `const name = "…"` (exported or not; a template's `${…}` parts
 * left out) in `text`, or undefined when the file has no such constant.
 */
export function constantText(fileName: string, text: string, name: string): string | undefined {
  const file = parse(fileName, text);
  for (const statement of file.statements) {
    if (!ts.isVariableStatement(statement) || !(statement.declarationList.flags & ts.NodeFlags.Const))
      continue;
    for (const decl of statement.declarationList.declarations) {
      if (ts.isIdentifier(decl.name) && decl.name.text === name && decl.initializer) {
        return literalText(decl.initializer);
      }
    }
  }
  return undefined;
}
