// A JSON-schema subset, enough for the flow authoring schema the server derives
// (falai_django.engine.spec_authoring): type, enum, properties, required, additionalProperties,
// items, anyOf, minimum. Objects marked x-falai-known-keys are open: an unknown key there is
// only a hint (the server ignores it), never an error; x-falai-expect names the type of a value
// the server reads loosely (any value as true or false), a warning when another is written.

export function typeOf(v) {
  if (v === null) { return "null"; }
  if (Array.isArray(v)) { return "array"; }
  if (typeof v === "number") { return Number.isInteger(v) ? "integer" : "number"; }
  return typeof v;
}

function typeOk(want, v) {
  const t = typeOf(v);
  return [].concat(want).some((w) => w === t || (w === "number" && t === "integer"));
}

const NAMES = {string: "text", integer: "a whole number", number: "a number", boolean: "true or false",
  null: "null", object: "an object", array: "a list"};

function describe(want) {
  return [].concat(want).filter((w) => w !== "null").map((w) => NAMES[w] || w).join(" or ") || "null";
}

// The branches of a schema, anyOf flattened.
export function branches(schema) {
  if (!schema) { return []; }
  if (schema.anyOf) { return schema.anyOf.flatMap(branches); }
  return [schema];
}

// How well an object value matches an object branch: its required keys present, and a key whose
// schema is a one-value enum (`do`, `kind`) equal to that value. Picks a step's or a trigger's
// form from what is written, so its problems are the ones reported.
export function fit(schema, keys, value) {
  let score = 0;
  for (const key of schema.required || []) { if (keys.includes(key)) { score += 1; } }
  const props = schema.properties || {};
  for (const key of keys) {
    const one = branches(props[key]).find((b) => b.enum && b.enum.length === 1);
    if (one && value && key in value && one.enum[0] === value[key]) { score += 2; }
  }
  return score;
}

// Problems of `value` under `schema`: [{path: [...keys], message, severity}].
export function check(schema, value, path = [], out = []) {
  if (!schema || out.length > 50) { return out; }
  if (schema.anyOf) {
    const options = branches(schema);
    let best = null;
    let bestFit = -Infinity;
    const keys = typeOf(value) === "object" ? Object.keys(value) : [];
    let clean = null;
    for (const option of options) {
      const found = check(option, value, path, []);
      if (!found.some((p) => p.severity === "error")) {
        if (clean === null || found.length < clean.length) { clean = found; }
        continue;
      }
      const score = option.type === "object" && keys.length ? fit(option, keys, value) : 0;
      const errors = found.filter((p) => p.severity === "error").length;
      if (best === null || score > bestFit || (score === bestFit && errors < best.errors)) {
        best = {found, errors};
        bestFit = score;
      }
    }
    if (clean !== null) { out.push(...clean); return out; }
    const objectForms = options.filter((o) => o.type === "object");
    if (typeOf(value) === "object" && objectForms.length && best) { out.push(...best.found); }
    else {
      const types = [...new Set(options.flatMap((o) => (o.type ? [].concat(o.type) : [])))];
      const enums = options.flatMap((o) => o.enum || []);
      const wanted = enums.length ? "one of " + enums.map((e) => JSON.stringify(e)).join(", ") : describe(types);
      out.push({path, severity: "error", message: `${last(path)} is ${shown(value)}; expected ${wanted}`});
    }
    return out;
  }
  if (schema.type !== undefined && !typeOk(schema.type, value)) {
    out.push({path, severity: "error", message: `${last(path)} is ${shown(value)}; expected ${describe(schema.type)}`});
    return out;
  }
  const expect = schema["x-falai-expect"];  // read loosely by the server: a hint, not an error
  if (expect && value !== null && value !== undefined && !typeOk(expect, value)) {
    out.push({path, severity: "warning",
      message: `${last(path)} is ${shown(value)}; it is read as ${value ? "true" : "false"}: write ${describe(expect)}`});
  }
  if (schema.enum && value !== null && !schema.enum.includes(value)) {
    out.push({path, severity: "error",
      message: `${last(path)} is ${JSON.stringify(value)}, which is not one of ${schema.enum.map((e) => JSON.stringify(e)).join(", ")}`});
  }
  if (schema.minimum !== undefined && typeof value === "number" && value < schema.minimum) {
    out.push({path, severity: "error", message: `${last(path)} is ${value}; it must be ${schema.minimum} or more`});
  }
  if (typeOf(value) === "object") {
    const props = schema.properties || {};
    for (const key of schema.required || []) {
      if (!(key in value)) { out.push({path, severity: "error", message: `${last(path)} has no ${JSON.stringify(key)}`}); }
    }
    for (const key of Object.keys(value)) {
      if (props[key]) { check(props[key], value[key], [...path, key], out); }
      else if (schema.additionalProperties === false) {
        out.push({path: [...path, key], severity: "error", key: true,
          message: `${JSON.stringify(key)} is not one of ${Object.keys(props).map((k) => JSON.stringify(k)).join(", ")}`});
      } else if (schema["x-falai-known-keys"]) {
        out.push({path: [...path, key], severity: "info", key: true,
          message: `${JSON.stringify(key)} is not a key the flow reads here; it is ignored`});
      }
    }
  }
  if (typeOf(value) === "array" && schema.items) {
    value.forEach((item, i) => check(schema.items, item, [...path, i], out));
  }
  return out;
}

function last(path) {
  for (let i = path.length - 1; i >= 0; i--) {
    if (typeof path[i] === "string") {
      return path.slice(i).map((p, j) => (j === 0 ? p : `[${p}]`)).join("");
    }
  }
  return path.length ? `item ${path[path.length - 1] + 1}` : "the spec";
}

function shown(value) {
  const t = typeOf(value);
  if (t === "object" || t === "array") { return NAMES[t]; }
  return JSON.stringify(value);
}

// The schemas a value at `path` may have, given the document (when it parses) to pick forms.
export function schemasAt(root, path, doc) {
  let here = [root];
  let value = doc;
  for (const part of path) {
    const next = [];
    const options = here.flatMap(branches);
    const objects = options.filter((o) => o.type === "object" || o.properties);
    const chosen = typeof part === "string" ? pickForms(objects, value) : options;
    for (const option of chosen) {
      if (typeof part === "string" && option.properties && option.properties[part]) {
        next.push(option.properties[part]);
      } else if (typeof part === "number" && option.items) {
        next.push(option.items);
      }
    }
    here = next;
    value = value !== undefined && value !== null && typeof value === "object" ? value[part] : undefined;
  }
  return here.flatMap(branches);
}

// The object forms that fit what is written best (all of them when nothing tells them apart).
export function pickForms(objects, value) {
  if (typeOf(value) !== "object" || objects.length < 2) { return objects; }
  const keys = Object.keys(value);
  const scores = objects.map((o) => fit(o, keys, value));
  const top = Math.max(...scores);
  return objects.filter((_, i) => scores[i] === top);
}
