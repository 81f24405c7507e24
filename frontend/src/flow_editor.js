// The flow page's editor: CodeMirror 6 over the spec textarea (which stays in the form, hidden,
// and is what is posted). Completion and quick lint come from the authoring schema the server
// derives from the running agent (falai_django.engine.spec_authoring, in the page as
// #falai-spec-schema); the verdict comes from the server itself: every pause in typing posts
// the spec to the flow admin's check URL, which runs the same check a save runs and answers with
// its message, its warnings and the picture. So the page never calls valid what a save refuses,
// or the other way round.
import {basicSetup} from "codemirror";
import {EditorView, keymap} from "@codemirror/view";
import {EditorState} from "@codemirror/state";
import {indentWithTab} from "@codemirror/commands";
import {json} from "@codemirror/lang-json";
import {syntaxTree} from "@codemirror/language";
import {forceLinting, linter, lintGutter} from "@codemirror/lint";
import {autocompletion} from "@codemirror/autocomplete";
import {branches, check, pickForms, schemasAt} from "./schema.js";

const VALUE_NODES = new Set(["Object", "Array", "String", "Number", "True", "False", "Null"]);
const TARGET_KEYS = new Set(["then", "else", "onFail", "on_fail", "then_", "else_", "step"]);

// ---------------------------------------------------------------------------- the syntax tree

function values(node) {
  const out = [];
  for (let child = node.firstChild; child; child = child.nextSibling) {
    if (VALUE_NODES.has(child.name)) { out.push(child); }
  }
  return out;
}

function properties(node) {
  const out = [];
  for (let child = node.firstChild; child; child = child.nextSibling) {
    if (child.name === "Property") { out.push(child); }
  }
  return out;
}

function keyOf(state, property) {
  const name = property.getChild("PropertyName");
  if (!name) { return null; }
  const text = state.sliceDoc(name.from, name.to);
  try { return JSON.parse(text); } catch (e) { return text.replace(/^"|"$/g, ""); }
}

function valueOf(property) {
  const found = values(property);
  return found.length ? found[found.length - 1] : null;
}

// The document as far as it parses: a value for every node that reads as one (for completion
// while the text is half-typed).
function treeValue(state, node) {
  if (!node) { return undefined; }
  switch (node.name) {
    case "Object": {
      const out = {};
      for (const p of properties(node)) {
        const key = keyOf(state, p);
        if (key !== null) { out[key] = treeValue(state, valueOf(p)); }
      }
      return out;
    }
    case "Array": return values(node).map((v) => treeValue(state, v));
    case "String": try { return JSON.parse(state.sliceDoc(node.from, node.to)); } catch (e) { return ""; }
    case "Number": return Number(state.sliceDoc(node.from, node.to));
    case "True": return true;
    case "False": return false;
    case "Null": return null;
    default: return undefined;
  }
}

function topValue(state) {
  const root = syntaxTree(state).topNode;
  return values(root)[0] || null;
}

// The node holding the value at `path` (or the nearest one above it that exists).
function nodeAt(state, path) {
  let node = topValue(state);
  let keyNode = null;
  for (const part of path) {
    if (!node) { break; }
    if (node.name === "Object" && typeof part === "string") {
      const p = properties(node).find((q) => keyOf(state, q) === part);
      if (!p) { break; }
      keyNode = p.getChild("PropertyName");
      node = valueOf(p) || keyNode;
    } else if (node.name === "Array" && typeof part === "number") {
      const v = values(node)[part];
      if (!v) { break; }
      keyNode = null;
      node = v;
    } else { break; }
  }
  return {node, keyNode};
}

// Where the cursor is: the path of keys and indexes to the value it is in.
function pathTo(state, node) {
  const path = [];
  for (let n = node; n && n.parent; n = n.parent) {
    const parent = n.parent;
    if (parent.name === "Property" && n.name !== "PropertyName") {
      const key = keyOf(state, parent);
      if (key !== null) { path.unshift(key); }
    } else if (parent.name === "Array" && VALUE_NODES.has(n.name)) {
      path.unshift(values(parent).findIndex((v) => v.from === n.from));
    }
  }
  return path;
}

// The text as JSON ({value}), or where it stops being JSON ({problem}): the parser's own position,
// or the end for text that stops short.
function parse(state) {
  const text = state.doc.toString();
  try { return {value: JSON.parse(text)}; } catch (error) {
    const at = /at position (\d+)/.exec(error.message);
    const lineCol = /line (\d+) column (\d+)/.exec(error.message);
    let pos = text.trimEnd().length;
    if (at) { pos = Number(at[1]); }
    else if (lineCol) { pos = state.doc.line(Number(lineCol[1])).from + Number(lineCol[2]) - 1; }
    pos = Math.max(0, Math.min(pos, text.length));
    const message = error.message.replace(/ in JSON at position \d+.*$/, "").replace(/^JSON\.parse: /, "");
    return {problem: {from: pos, to: pos, severity: "error", message, source: "json"}};
  }
}

// ---------------------------------------------------------------------------- completion

function label(value) { return JSON.stringify(value); }

function stepIds(doc) {
  const steps = doc && Array.isArray(doc.steps) ? doc.steps : [];
  return steps.map((s) => (s && typeof s.id === "string" ? s.id : null)).filter(Boolean);
}

function complete(schema) {
  return (context) => {
    const {state, pos} = context;
    const node = syntaxTree(state).resolveInner(pos, -1);
    const doc = treeValue(state, topValue(state));
    const inString = node.name === "String" || node.name === "PropertyName";
    // A string being typed is replaced whole (its closing quote included, when the editor added
    // one); what is typed of it so far filters the options.
    const from = inString ? node.from : pos;
    const to = inString ? Math.max(pos, node.to) : pos;
    const typed = inString ? state.sliceDoc(node.from, pos).replace(/^"/, "").toLowerCase() : "";
    if (!context.explicit && !inString && !/[\w"]$/.test(state.sliceDoc(pos - 1, pos))) { return null; }
    const result = (options) => {
      const kept = options.filter((o) => JSON.parse(o.label).toString().toLowerCase().startsWith(typed));
      return kept.length ? {from, to, options: kept, filter: false} : null;
    };

    // A key: in a PropertyName, or where an object expects its next key.
    let object = null;
    if (node.name === "PropertyName") { object = node.parent.parent; }
    else if (node.name === "Object") { object = node; }
    else if (node.name === "⚠" && node.parent && node.parent.name === "Object") { object = node.parent; }
    else if (node.name === "{" || node.name === ",") {
      if (node.parent && node.parent.name === "Object") { object = node.parent; }
    }
    if (object && object.name === "Object") {
      const path = pathTo(state, object);
      const here = treeValue(state, object) || {};
      const objects = schemasAt(schema, path, doc).filter((s) => s.properties);
      const taken = new Set(Object.keys(here));
      const seen = new Set();
      const options = [];
      for (const form of pickForms(objects, here)) {
        for (const [key, sub] of Object.entries(form.properties)) {
          if (seen.has(key) || taken.has(key) || sub["x-falai-alias"]) { continue; }
          seen.add(key);
          const info = sub.description || branches(sub).map((b) => b.description).find(Boolean);
          options.push({label: label(key), type: "property", apply: `${label(key)}: `,
            detail: (form.required || []).includes(key) ? "required" : undefined, info});
        }
      }
      return result(options);
    }

    // A value: after a key's colon, or an item of a list.
    let valueNode = node;
    if (node.name === ":" && node.parent) { valueNode = node.parent; }
    const path = valueNode.name === "Property" ? [...pathTo(state, valueNode), keyOf(state, valueNode)]
      : valueNode.name === "Array" ? [...pathTo(state, valueNode), values(valueNode).filter((v) => v.to <= pos).length]
        : pathTo(state, valueNode);
    const forms = schemasAt(schema, path, doc);
    const options = [];
    const seen = new Set();
    const add = (value, type, info) => {
      const text = label(value);
      if (!seen.has(text)) { seen.add(text); options.push({label: text, type, info, apply: text}); }
    };
    for (const form of forms) {
      for (const value of form.enum || []) { add(value, "enum", form.description); }
      const types = [].concat(form.type || []);
      if (types.includes("boolean") || form["x-falai-expect"] === "boolean") { add(true, "keyword"); add(false, "keyword"); }
    }
    if (TARGET_KEYS.has(path[path.length - 1])) {
      for (const id of stepIds(doc)) { add(id, "variable", "a step of this flow"); }
      add("end", "keyword", "finish the run");
    }
    return result(options);
  };
}

// ---------------------------------------------------------------------------- the page

function csrf() {
  const input = document.querySelector("input[name=csrfmiddlewaretoken]");
  return input ? input.value : "";
}

function mount() {
  const area = document.getElementById("id_spec");
  const box = document.getElementById("falai-live");
  const schemaNode = document.getElementById("falai-spec-schema");
  const picture = document.getElementById("falai-picture");
  if (!area || !box || !box.dataset.checkUrl) { return null; }
  const host = document.createElement("div");
  host.id = "falai-editor";
  host.className = "falai-editor";
  area.after(host);
  // the verdict right under the text it is about (below the field's row, not beside it)
  (area.closest(".flex-container") || host).after(box);
  const schema = schemaNode ? JSON.parse(schemaNode.textContent) : null;
  const idInput = document.getElementById("id_id");
  const flowId = () => (idInput ? idInput.value.trim() : "");
  let lastVerdict = null;

  function show(kind, title, items) {
    box.hidden = false;
    box.className = "falai-live " + kind;
    box.textContent = "";
    box.appendChild(document.createTextNode(title));
    if (items && items.length) {
      const ul = document.createElement("ul");
      for (const item of items) {
        const li = document.createElement("li");
        li.textContent = item;
        ul.appendChild(li);
      }
      box.appendChild(ul);
    }
  }

  // Where the server's message points: the step or trigger it names, and in it the first quoted
  // name it mentions.
  function locate(state, message) {
    let path = [];
    const step = /step "([^"]+)"/.exec(message);
    const stepNo = /step #(\d+)/.exec(message);
    const trigger = /trigger #(\d+)/.exec(message);
    const doc = treeValue(state, topValue(state)) || {};
    if (step) {
      const i = stepIds(doc).indexOf(step[1]);
      if (i >= 0) { path = ["steps", i]; }
    } else if (stepNo) { path = ["steps", Number(stepNo[1]) - 1]; }
    else if (trigger) { path = ["on", Number(trigger[1]) - 1]; }
    const {node} = nodeAt(state, path);
    const within = node || topValue(state);
    if (!within) { return {from: 0, to: 0}; }
    const what = message.replace(/^\[FlowConfigurationError\][^:]*:/, "");
    for (const match of what.matchAll(/"([^"]+)"/g)) {
      const needle = JSON.stringify(match[1]);
      const at = state.sliceDoc(within.from, within.to).indexOf(needle);
      if (at >= 0) { return {from: within.from + at, to: within.from + at + needle.length}; }
    }
    const line = state.doc.lineAt(within.from);
    return {from: within.from, to: Math.min(within.to, line.to)};
  }

  async function serverCheck(view) {
    const text = view.state.doc.toString();
    const url = new URL(box.dataset.checkUrl, window.location.href);
    url.searchParams.set("id", flowId());
    let verdict;
    try {
      const response = await fetch(url, {method: "POST", body: text, credentials: "same-origin",
        headers: {"X-CSRFToken": csrf(), "Content-Type": "application/json"}});
      if (!response.ok && response.headers.get("Content-Type") !== "application/json") {
        throw new Error(`${response.status} ${response.statusText}`);
      }
      verdict = await response.json();
    } catch (error) {
      console.error("falai flow editor: the server's check failed", error);
      show("bad", (box.dataset.unreachable || "Could not check the spec with the server:") + " " + error.message);
      return [];
    }
    if (view.state.doc.toString() !== text) { return []; }  // typed on meanwhile: a newer check follows
    lastVerdict = verdict;
    if (picture && verdict.picture) { picture.innerHTML = verdict.picture; }
    if (verdict.ok) {
      show("ok", box.dataset.ok || "The server accepts this flow.", verdict.warnings);
      return (verdict.warnings || []).map((w) => ({...locate(view.state, w), severity: "warning", message: w,
        source: "server"}));
    }
    show("bad", verdict.error, verdict.warnings);
    return [{...locate(view.state, verdict.error), severity: "error", message: verdict.error, source: "server"}];
  }

  async function lint(view) {
    const {value, problem: broken} = parse(view.state);
    if (broken) {
      const line = view.state.doc.lineAt(broken.from).number;
      show("bad", (box.dataset.invalid || "Not valid JSON yet:") + ` ${broken.message} (line ${line})`);
      return [broken];
    }
    const found = [];
    if (schema) {
      for (const problem of check(schema, value)) {
        const {node, keyNode} = nodeAt(view.state, problem.path);
        const mark = (problem.key && keyNode) || node || topValue(view.state);
        found.push({from: mark ? mark.from : 0, to: mark ? mark.to : 0, severity: problem.severity,
          message: problem.message, source: "schema"});
      }
    }
    return [...found, ...(await serverCheck(view))];
  }

  area.hidden = true;
  const view = new EditorView({
    parent: host,
    state: EditorState.create({
      doc: area.value,
      extensions: [
        basicSetup,
        keymap.of([indentWithTab]),
        json(),
        EditorView.lineWrapping,
        lintGutter(),
        linter(lint, {delay: 350}),
        autocompletion({override: schema ? [complete(schema)] : []}),
        EditorView.updateListener.of((update) => {
          if (update.docChanged) { area.value = update.state.doc.toString(); }
        }),
        EditorView.contentAttributes.of({"aria-label": area.getAttribute("aria-label") || "spec",
          "data-gramm": "false", spellcheck: "false"}),
      ],
    }),
  });
  // A script (or a browser extension) that sets the textarea itself: the editor follows it.
  area.addEventListener("input", () => {
    if (area.value !== view.state.doc.toString()) {
      view.dispatch({changes: {from: 0, to: view.state.doc.length, insert: area.value}});
    }
  });
  if (idInput) {
    idInput.addEventListener("input", () => forceLinting(view));  // the id is part of the check
  }
  const api = {
    view,
    text: () => view.state.doc.toString(),
    setText: (text) => view.dispatch({changes: {from: 0, to: view.state.doc.length, insert: text}}),
    schemaProblems: (value) => (schema ? check(schema, value) : []),
    verdict: () => lastVerdict,
  };
  window.falaiFlowEditor = api;
  // the earlier page's name for the schema check: the error messages for a value
  window.falaiCheckSpec = (value) => api.schemaProblems(value).filter((p) => p.severity === "error").map((p) => p.message);
  return api;
}

if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", mount); }
else { mount(); }
