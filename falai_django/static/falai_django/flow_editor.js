// The flow page's live checks: the spec textarea is parsed and checked against the agent's
// flow_spec_schema as you type (a small validator for the keywords that schema uses: type,
// enum, properties, required, additionalProperties, items, anyOf), and the picture is redrawn
// by the server. A key left out reads as null, as from_spec reads it. Saving still checks the
// spec on the server against the agent's registries: this is only a quicker signal.
(function () {
  "use strict";
  var area = document.getElementById("id_spec");
  var box = document.getElementById("falai-live");
  var schemaNode = document.getElementById("falai-spec-schema");
  var picture = document.getElementById("falai-picture");
  if (!area || !box) { return; }
  var schema = schemaNode ? JSON.parse(schemaNode.textContent) : null;

  function typeOf(v) {
    if (v === null) { return "null"; }
    if (Array.isArray(v)) { return "array"; }
    if (typeof v === "number") { return Number.isInteger(v) ? "integer" : "number"; }
    return typeof v;
  }
  function typeOk(want, v) {
    var t = typeOf(v);
    var list = Array.isArray(want) ? want : [want];
    return list.some(function (w) { return w === t || (w === "number" && t === "integer"); });
  }
  function nullable(s) {
    if (!s) { return true; }
    if (s.type !== undefined && typeOk(s.type, null)) { return true; }
    if (s.anyOf) { return s.anyOf.some(nullable); }
    return false;
  }
  function check(s, v, at, out) {
    if (!s || out.length > 20) { return; }
    if (s.anyOf) {
      var best = null;
      for (var i = 0; i < s.anyOf.length; i++) {
        var errs = [];
        check(s.anyOf[i], v, at, errs);
        if (!errs.length) { return; }
        if (best === null || errs.length < best.length) { best = errs; }
      }
      if (typeOf(v) === "object" && best) { Array.prototype.push.apply(out, best); }
      else { out.push(at + ": does not match any allowed form"); }
      return;
    }
    if (s.type !== undefined && !typeOk(s.type, v)) {
      out.push(at + ": is " + typeOf(v) + ", expected " + [].concat(s.type).join(" or "));
      return;
    }
    if (s.enum && v !== null && s.enum.indexOf(v) < 0) {
      out.push(at + ": " + JSON.stringify(v) + " is not one of " + s.enum.map(function (e) { return JSON.stringify(e); }).join(", "));
    }
    if (typeOf(v) === "object") {
      var props = s.properties || {};
      (s.required || []).forEach(function (k) {
        if (!(k in v) && !nullable(props[k])) { out.push(at + ": missing " + k); }
      });
      Object.keys(v).forEach(function (k) {
        if (props[k]) { check(props[k], v[k], at + "." + k, out); }
        else if (s.additionalProperties === false) { out.push(at + ": unknown key " + JSON.stringify(k)); }
      });
    }
    if (typeOf(v) === "array" && s.items) {
      v.forEach(function (item, i) { check(s.items, item, at + "[" + i + "]", out); });
    }
  }
  function csrf() {
    var input = document.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }
  var timer = null;
  function redraw(text) {
    if (!picture || !picture.dataset.url) { return; }
    fetch(picture.dataset.url, {method: "POST", body: text, credentials: "same-origin",
                                headers: {"X-CSRFToken": csrf(), "Content-Type": "application/json"}})
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (svg) { if (svg) { picture.innerHTML = svg; } })
      .catch(function () {});
  }
  function show(problems) {
    box.hidden = false;
    box.className = "falai-live " + (problems.length ? "bad" : "ok");
    box.textContent = "";
    if (!problems.length) { box.textContent = box.dataset.ok || "The spec matches the agent's FlowSpec schema."; return; }
    var ul = document.createElement("ul");
    problems.slice(0, 12).forEach(function (p) { var li = document.createElement("li"); li.textContent = p; ul.appendChild(li); });
    box.appendChild(document.createTextNode("The spec does not match the agent's FlowSpec schema:"));
    box.appendChild(ul);
  }
  function run() {
    var value;
    try { value = JSON.parse(area.value); }
    catch (e) { show(["not valid JSON (" + e.message + ")"]); return; }
    var problems = [];
    if (schema) { check(schema, value, "spec", problems); }
    show(problems);
    clearTimeout(timer);
    timer = setTimeout(function () { redraw(area.value); }, 300);
  }
  area.addEventListener("input", run);
  run();
  window.falaiCheckSpec = function (value) { var out = []; check(schema, value, "spec", out); return out; };
})();
