/* lcg export-html: the page's bootstrap. The data is the JSON in #lcg-data, already normalised
 * for graph.js (nodes {id, name, type, group, labels, summary}, edges with validity in ms). */
(function (global) {
  'use strict';
  var G = global.LcgGraph;
  var data = JSON.parse(document.getElementById('lcg-data').textContent);
  var $ = function (id) { return document.getElementById(id); };
  var byId = new Map(data.nodes.map(function (n) { return [n.id, n]; }));

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text != null) node.textContent = text;
    return node;
  }

  var view = new G.GraphView($('graph'), { tooltip: $('tooltip') });
  view.setData(data.nodes, data.edges);
  view.requestFrame();

  var superseded = data.edges.filter(function (e) { return e.superseded; }).length;
  $('caption').textContent = (data.asOf ? 'as of ' + data.asOf + ' UTC' : 'current and superseded facts') +
    ' · exported ' + data.generatedAt + ' UTC';
  $('graph-stats').textContent = data.nodes.length + ' of ' + data.totalNodes + ' entities · ' +
    data.edges.length + ' facts' + (superseded ? ' (' + superseded + ' superseded)' : '');
  var groups = Array.from(new Set(data.nodes.map(function (n) { return n.group; }))).sort();
  if (groups.length > 1) {
    // Names shared across groups carry their group ("Mercury (alpha)"): say so once.
    $('caption').textContent += ' · groups: ' + groups.join(', ');
  }
  // A key, not a node: "Colour = type", then "● 12 Person", "● 27 untyped".
  var legend = $('legend');
  legend.appendChild(el('span', 'legend-title', 'Colour = type:'));
  view.types().slice(0, 10).forEach(function (t) {
    var untyped = t.type === 'Entity';
    var item = el('span', 'legend-item');
    item.setAttribute('data-type', t.type);
    item.title = t.count + (t.count === 1 ? ' entity' : ' entities') +
      (untyped ? ' with no type label' : ' labelled ' + t.type);
    var sw = el('span', 'swatch');
    sw.style.background = t.color;
    item.appendChild(sw);
    item.appendChild(el('b', null, String(t.count)));
    item.appendChild(document.createTextNode(' ' + (untyped ? 'untyped' : t.type)));
    legend.appendChild(item);
  });
  if (superseded) {
    var key = el('span', 'legend-item');
    key.appendChild(el('span', 'dash'));
    key.appendChild(document.createTextNode('superseded fact'));
    legend.appendChild(key);
  }

  function details(node) {
    var box = $('details');
    while (box.firstChild) box.removeChild(box.firstChild);
    if (!node) return;
    box.appendChild(el('h2', null, node.name));
    if (node.group) box.appendChild(el('p', 'hint group', 'group ' + node.group));
    (node.labels || []).forEach(function (l) { box.appendChild(el('span', 'chip', l)); });
    if (node.summary) box.appendChild(el('p', null, node.summary));
    box.appendChild(el('h3', null, 'Facts'));
    var list = el('ul', 'list');
    data.edges.filter(function (e) { return e.source === node.id || e.target === node.id; })
      .sort(function (a, b) { return (a.superseded - b.superseded) || ((a.validFrom || 0) - (b.validFrom || 0)); })
      .forEach(function (e) {
        var other = byId.get(e.source === node.id ? e.target : e.source);
        var li = el('li', 'fact ' + e.status);
        li.title = G.validityText(e);
        li.appendChild(el('span', 'pred', e.label));
        li.appendChild(document.createTextNode((e.source === node.id ? ' → ' : ' ← ') + (other ? other.name : '?')));
        li.appendChild(el('span', 'badge ' + e.status, e.status));
        if (e.fact) li.appendChild(el('div', null, e.fact));
        li.appendChild(el('span', 'when', G.validityText(e)));
        list.appendChild(li);
      });
    box.appendChild(list);
  }

  view.on('select', details);
  $('find').addEventListener('submit', function (ev) {
    ev.preventDefault();
    var q = $('find-input').value.trim().toLowerCase();
    var hits = data.nodes.filter(function (n) { return q && n.name.toLowerCase().indexOf(q) >= 0; });
    view.highlight(hits.map(function (n) { return n.id; }));
    if (hits.length) { view.select(hits[0].id); details(hits[0]); }
  });
})(window);
