"use strict";
// Progressive enhancement only: every value is inserted with textContent, never as HTML.
(function () {
  document.documentElement.classList.add("js");
  var dataEl = document.getElementById("items-data");
  var items = dataEl ? JSON.parse(dataEl.textContent) : [];
  var PAGE = 20;
  var page = 0;
  var body = document.getElementById("items-body");
  var filter = document.getElementById("item-filter");
  var dirSel = document.getElementById("item-dir");
  var evalSel = document.getElementById("item-eval");
  var info = document.getElementById("item-info");
  var prev = document.getElementById("item-prev");
  var next = document.getElementById("item-next");
  var LABELS = { right_to_wrong: "right \u2192 wrong", wrong_to_right: "wrong \u2192 right", changed: "changed", same: "unchanged" };

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) { node.className = cls; }
    if (text !== undefined) { node.textContent = String(text); }
    return node;
  }

  function side(title, text) {
    var box = el("div");
    box.appendChild(el("h4", null, title));
    box.appendChild(el("pre", null, text));
    return box;
  }

  function render(it) {
    // it = [eval, doc_id, bin, direction, base_score, cand_score, prompt, base_out, cand_out, truncated]
    var card = el("div", "item");
    card.setAttribute("data-direction", it[3]);
    var meta = el("div", "meta");
    meta.appendChild(el("span", "badge d-" + it[3], LABELS[it[3]] || it[3]));
    meta.appendChild(document.createTextNode(" " + it[0] + " \u00b7 item " + it[1] + (it[2] ? " \u00b7 bin " + it[2] : "") +
      " \u00b7 score " + it[4] + " \u2192 " + it[5] + (it[9] ? " \u00b7 truncated" : "")));
    card.appendChild(meta);
    card.appendChild(el("div", "prompt", it[6]));
    var pair = el("div", "pair");
    pair.appendChild(side("baseline (stock)", it[7]));
    pair.appendChild(side("candidate (switch on)", it[8]));
    card.appendChild(pair);
    return card;
  }

  function matching() {
    var q = filter ? filter.value.trim().toLowerCase() : "";
    var dir = dirSel ? dirSel.value : "";
    var ev = evalSel ? evalSel.value : "";
    return items.filter(function (it) {
      if (dir === "flipped" && it[3] === "same") { return false; }
      if (dir && dir !== "flipped" && it[3] !== dir) { return false; }
      if (ev && it[0] !== ev) { return false; }
      if (!q) { return true; }
      return (it[0] + " " + it[1] + " " + it[2] + " " + it[6] + " " + it[7] + " " + it[8]).toLowerCase().indexOf(q) !== -1;
    });
  }

  function update() {
    if (!body) { return; }
    var rows = matching();
    var pages = Math.max(1, Math.ceil(rows.length / PAGE));
    if (page >= pages) { page = pages - 1; }
    var frag = document.createDocumentFragment();
    rows.slice(page * PAGE, page * PAGE + PAGE).forEach(function (it) { frag.appendChild(render(it)); });
    while (body.firstChild) { body.removeChild(body.firstChild); }
    body.appendChild(frag);
    if (info) {
      info.textContent = rows.length + " of " + items.length + " embedded items match \u00b7 page " + (page + 1) + " of " + pages;
    }
    if (prev) { prev.disabled = page === 0; }
    if (next) { next.disabled = page >= pages - 1; }
  }

  if (evalSel) {
    var seen = {};
    items.forEach(function (it) {
      if (!seen[it[0]]) {
        seen[it[0]] = true;
        var opt = el("option", null, it[0]);
        opt.value = it[0];
        evalSel.appendChild(opt);
      }
    });
  }
  [filter, dirSel, evalSel].forEach(function (c) {
    if (c) { c.addEventListener("input", function () { page = 0; update(); }); }
  });
  if (prev) { prev.addEventListener("click", function () { page -= 1; update(); }); }
  if (next) { next.addEventListener("click", function () { page += 1; update(); }); }
  if (items.length) { update(); }

  // Filter the table of every outcome by text.
  var outFilter = document.getElementById("outcome-filter");
  if (outFilter) {
    var outRows = Array.prototype.slice.call(document.querySelectorAll("#outcomes-table tbody tr"));
    outFilter.addEventListener("input", function () {
      var q = outFilter.value.trim().toLowerCase();
      outRows.forEach(function (tr) { tr.hidden = q !== "" && tr.textContent.toLowerCase().indexOf(q) === -1; });
    });
  }

  function setAll(open) {
    Array.prototype.forEach.call(document.querySelectorAll("section > details"), function (d) { d.open = open; });
  }
  var expand = document.getElementById("expand-all");
  var collapse = document.getElementById("collapse-all");
  if (expand) { expand.addEventListener("click", function () { setAll(true); }); }
  if (collapse) { collapse.addEventListener("click", function () { setAll(false); }); }
})();
