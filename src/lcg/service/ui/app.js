/* lcg UI: the views (explore, timeline, changes, cypher, status) and their state.
 * Reads API results only through LcgShapes; draws the graph through LcgGraph.
 */
(function (global) {
  'use strict';

  var api = global.LcgApi, shapes = global.LcgShapes, G = global.LcgGraph;
  var $ = function (id) { return document.getElementById(id); };
  var DAY = 86400000;

  var S = {
    methods: new Set(), scopes: [],
    group: '',
    at: null, axis: 'valid',
    range: [Date.now() - 365 * DAY, Date.now()],
    limit: 2000,
    superseded: null,              // show superseded facts: null = the default for the graph's size
    nodes: [], edges: [],          // the group's graph at the view's instant
    extraNodes: new Map(), extraEdges: new Map(), expanded: new Set(),
    known: new Map(),              // every node seen: uuid -> node
    selected: null, highlighted: [],
    episodes: new Map(),           // group -> Promise of episodes
    loadSeq: 0,
    loaded: null                   // the first graph load (names for the other views)
  };
  var view = null;

  // -- DOM helpers -----------------------------------------------------------------------------

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      var v = attrs[k];
      if (v == null || v === false) return;
      if (k === 'text') node.textContent = v;
      else if (k === 'class') node.className = v;
      else if (k.slice(0, 2) === 'on') node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? '' : v);
    });
    (children || []).forEach(function (c) {
      if (c == null) return;
      node.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
    });
    return node;
  }

  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }

  function errorBox(err) {
    var msg = err && err.message ? err.message : String(err);
    return el('div', { class: 'error', text: msg + (err && err.code != null ? ' (code ' + err.code + ')' : '') });
  }

  function has(method) { return S.methods.has(method); }

  function groupIds() { return S.group ? { group_ids: [S.group] } : {}; }

  function nameOf(uuid) {
    var n = S.known.get(uuid);
    return n ? n.name : uuid.slice(0, 8) + '…';
  }

  function remember(nodes) { nodes.forEach(function (n) { S.known.set(n.id, n); }); }

  function debounce(fn, ms) {
    var timer = null;
    return function () { clearTimeout(timer); timer = setTimeout(fn, ms); };
  }

  // -- routing ---------------------------------------------------------------------------------

  var VIEWS = ['explore', 'timeline', 'changes', 'cypher', 'status'];

  function route() {
    var parts = (location.hash || '#explore').slice(1).split('/');
    var name = VIEWS.indexOf(parts[0]) >= 0 ? parts[0] : 'explore';
    if (name === 'cypher' && S.scopes.indexOf('cypher') < 0) name = 'explore';
    VIEWS.forEach(function (v) {
      $('view-' + v).hidden = v !== name;
      var tab = document.querySelector('#tabs a[data-view="' + v + '"]');
      if (tab) tab.classList.toggle('active', v === name);
    });
    if (name === 'explore' && view) { view.resize(); view.requestFrame(); }
    if (name === 'status') loadStatusView();
    if (name === 'timeline' && parts[1]) showTimeline({ entity_uuid: decodeURIComponent(parts[1]) });
    if (name === 'changes' && !$('changes-since').value) {
      $('changes-since').value = new Date(S.range[0]).toISOString().slice(0, 10);
    }
  }

  // -- explore: the graph ------------------------------------------------------------------------

  function loadGraph() {
    var seq = ++S.loadSeq;
    var g = groupIds();
    var edgeParams = Object.assign({}, g, shapes.timeParams(S.at, S.axis));
    // The first load of "all groups, now" may come with the page (/ui/first-graph.js): drawn
    // before the load event, with no request.
    var first = global.LCG_FIRST_GRAPH;
    global.LCG_FIRST_GRAPH = null;
    var usable = first && !S.group && S.at == null && !S.expanded.size;
    return Promise.all(usable ? [first.nodes, first.edges, null] : [
      api.call('knowledge_get_nodes_by_group', g),
      api.call('knowledge_get_edges_by_group', edgeParams),
      reloadExpansions()
    ]).then(function (res) {
      if (seq !== S.loadSeq) return; // a newer load is on its way
      var data = shapes.graphResult(res[0], res[1], S.at);
      S.nodes = data.nodes; S.edges = data.edges;
      remember(data.nodes);
      if (!S.group) fillGroups(data.nodes);
      if (S.at == null) widenRange(data.edges);
      render();
    }).catch(function (err) {
      $('graph-stats').textContent = '';
      clear($('results')).appendChild(errorBox(err));
    });
  }

  function reloadExpansions() {
    var ids = Array.from(S.expanded);
    S.extraNodes = new Map(); S.extraEdges = new Map();
    return Promise.all(ids.map(function (id) { return fetchNeighbours(id); }));
  }

  function fetchNeighbours(id) {
    var params = Object.assign({ entity_uuid: id, num_results: 200 }, shapes.timeParams(S.at, S.axis));
    return api.call('knowledge_get_entity_neighbors', params).then(function (res) {
      var nb = shapes.neighbours(res, S.at);
      remember(nb.nodes);
      nb.nodes.forEach(function (n) { S.extraNodes.set(n.id, n); });
      nb.edges.forEach(function (e) { S.extraEdges.set(e.id, e); });
      return nb;
    });
  }

  function widenRange(edges) {
    var lo = S.range[0];
    edges.forEach(function (e) {
      [e.validFrom, e.validTo, e.learnedAt].forEach(function (t) { if (t != null && t < lo) lo = t; });
    });
    // A month of margin: the slider's left end shows the graph before anything was true.
    S.range = [Math.min(lo - 30 * DAY, S.range[0]), Date.now()];
    syncTimeControls();
  }

  /* Superseded facts are drawn by default in a small graph, on demand (the toggle) in a large one. */
  var SUPERSEDED_DEFAULT_MAX = 150;

  function showSuperseded(total) {
    return S.superseded != null ? S.superseded : total <= SUPERSEDED_DEFAULT_MAX;
  }

  /* Whether an entity existed at the view's instant: it has a fact then, or the graph had it by
   * then. "Now" shows every entity. */
  function existedAt(n, withFacts) {
    if (S.at == null || withFacts.has(n.id)) return true;
    return n.createdAt != null && n.createdAt <= S.at;
  }

  /* The nodes drawn: the best-connected `limit` of the group's entities that existed at the
   * view's instant, plus everything the user pulled in (search hits, expansions, the
   * selection); the facts drawn: those among drawn nodes (superseded ones when shown). */
  function render() {
    var all = S.edges.slice();
    var seen = new Set(all.map(function (e) { return e.id; }));
    S.extraEdges.forEach(function (e) { if (!seen.has(e.id)) { all.push(e); seen.add(e.id); } });
    var supersededAll = all.filter(function (e) { return e.superseded; }).length;
    var withSuperseded = showSuperseded(all.length);
    $('show-superseded').checked = withSuperseded;
    var edges = withSuperseded ? all : all.filter(function (e) { return !e.superseded; });
    var withFacts = new Set();
    all.forEach(function (e) { withFacts.add(e.source); withFacts.add(e.target); });
    var byId = new Map(S.nodes.filter(function (n) { return existedAt(n, withFacts); })
      .map(function (n) { return [n.id, n]; }));
    S.extraNodes.forEach(function (n) { if (!byId.has(n.id)) byId.set(n.id, n); });
    var degree = new Map();
    edges.forEach(function (e) {
      degree.set(e.source, (degree.get(e.source) || 0) + 1);
      degree.set(e.target, (degree.get(e.target) || 0) + 1);
    });
    var ranked = Array.from(byId.values()).sort(function (a, b) {
      return (degree.get(b.id) || 0) - (degree.get(a.id) || 0) || (a.name < b.name ? -1 : 1);
    });
    var keep = new Set(S.limit ? ranked.slice(0, S.limit).map(function (n) { return n.id; }) : ranked.map(function (n) { return n.id; }));
    S.extraNodes.forEach(function (n) { keep.add(n.id); });
    if (S.selected && byId.has(S.selected)) keep.add(S.selected);
    var nodes = ranked.filter(function (n) { return keep.has(n.id); });
    var shown = edges.filter(function (e) { return keep.has(e.source) && keep.has(e.target); });
    view.setData(nodes, shown);
    view.select(S.selected);
    view.highlight(S.highlighted);
    var superseded = shown.filter(function (e) { return e.superseded; }).length;
    var hidden = withSuperseded ? 0 : supersededAll;
    var absent = S.nodes.length - S.nodes.filter(function (n) { return byId.has(n.id); }).length;
    $('graph-stats').textContent = nodes.length + ' of ' + byId.size + ' entities · ' + shown.length +
      ' facts' + (superseded ? ' (' + superseded + ' superseded)' : '') +
      (hidden ? ' · ' + hidden + ' superseded hidden' : '') +
      (absent ? ' · ' + absent + ' not yet in the graph then' : '');
    renderLegend(superseded);
  }

  /* A key, not a node: "Colour = type", then "● 12 Person", "● 27 untyped" (counts shown). */
  function renderLegend(superseded) {
    var box = clear($('legend'));
    box.appendChild(el('span', { class: 'legend-title', text: 'Colour = type:' }));
    view.types().slice(0, 10).forEach(function (t) {
      var untyped = t.type === 'Entity';
      var item = el('span', { class: 'legend-item', 'data-type': t.type,
        title: t.count + (t.count === 1 ? ' entity' : ' entities') +
          (untyped ? ' with no type label' : ' labelled ' + t.type) });
      var sw = el('span', { class: 'swatch' });
      sw.style.background = t.color;
      item.appendChild(sw);
      item.appendChild(el('b', { text: String(t.count) }));
      item.appendChild(document.createTextNode(' ' + (untyped ? 'untyped' : t.type)));
      box.appendChild(item);
    });
    if (superseded) {
      var key = el('span', { class: 'legend-item', title: superseded + ' superseded facts' });
      key.appendChild(el('span', { class: 'dash' }));
      key.appendChild(document.createTextNode('superseded fact'));
      box.appendChild(key);
    }
  }

  function focusNode(id) {
    S.selected = id;
    var inGraph = view.byId.has(id);
    var done = inGraph ? Promise.resolve() : fetchNeighbours(id).then(function () {
      S.expanded.add(id);
      var n = S.known.get(id);
      if (n) S.extraNodes.set(id, n);
      render();
    });
    return done.then(function () {
      view.select(id);
      return showDetails(id);
    });
  }

  function expand(id) {
    S.expanded.add(id);
    return fetchNeighbours(id).then(function () {
      var n = S.known.get(id);
      if (n) S.extraNodes.set(id, n);
      render();
    }).catch(function (err) { $('details').appendChild(errorBox(err)); });
  }

  // -- explore: details --------------------------------------------------------------------------

  function factItem(e, centre) {
    var other = e.source === centre ? e.target : e.source;
    var arrow = e.source === centre ? ' → ' : ' ← ';
    var cls = 'fact ' + (e.superseded ? e.status || 'superseded' : 'current');
    return el('li', { class: cls, 'data-fact': e.id, title: G.validityText(e) }, [
      el('span', { class: 'pred', text: e.label }),
      arrow, el('a', { text: nameOf(other), href: '#explore', onclick: function (ev) { ev.preventDefault(); focusNode(other); } }),
      el('span', { class: 'badge ' + (e.superseded ? e.status || 'superseded' : 'current'), text: e.superseded ? e.status || 'superseded' : 'current' }),
      e.fact ? el('div', { text: e.fact }) : null,
      el('span', { class: 'when', text: G.validityText(e) })
    ]);
  }

  /* What a code entity is and where: its kind (File, Module, Class, Function, Method), its
   * `path:line_start-line_end`, and (`full`) its signature and first doc line. */
  function codeInfo(n, full) {
    var c = n.code;
    if (!c) return null;
    return el('div', { class: 'code-info' }, [
      el('span', { class: 'kind kind-' + c.kind, text: c.kind }),
      c.location ? el('code', { class: 'code-loc', text: c.location }) : null,
      c.removed && !c.renamedTo ? el('span', { class: 'badge ended', text: 'removed' }) : null,
      c.renamedTo ? el('span', { class: 'badge ended', text: 'renamed' }) : null,
      c.renamedTo ? el('span', { class: 'hint code-renamed', text: ' to ' + c.renamedTo }) : null,
      c.external ? el('span', { class: 'hint', text: ' imported, not in the repository' }) : null,
      full && c.signature ? el('pre', { class: 'code-sig', text: c.signature }) : null,
      full && c.variants.length ? el('div', { class: 'hint', text: 'one symbol, ' + c.variants.length + ' variants (overloads):' }) : null,
      full && c.variants.length ? el('pre', { class: 'code-variants', text: c.variants.join('\n') }) : null,
      full && c.doc ? el('div', { class: 'code-doc', text: c.doc }) : null,
      full && c.language ? el('div', { class: 'hint', text: c.language + (c.lines != null ? ', ' + c.lines + ' lines' : '') }) : null
    ]);
  }

  function episodesFor(group) {
    if (!has('knowledge_get_episodes')) return Promise.resolve([]);
    if (!S.episodes.has(group)) {
      S.episodes.set(group, api.call('knowledge_get_episodes', { group_id: group, last_n: 500 })
        .then(shapes.episodes));
    }
    return S.episodes.get(group);
  }

  function showDetails(id) {
    var box = clear($('details'));
    var n = S.known.get(id);
    if (!n) return Promise.resolve();
    box.appendChild(el('h2', { text: n.name }));
    box.appendChild(el('div', {}, n.labels.map(function (l) { return el('span', { class: 'chip', text: l }); })));
    box.appendChild(el('div', { class: 'hint', text: 'group ' + n.group }));
    var info = codeInfo(n, true);
    if (info) { info.id = 'detail-code'; box.appendChild(info); }
    else if (n.summary) box.appendChild(el('p', { text: n.summary }));
    var attrs = Object.keys(n.attributes);
    if (attrs.length) {
      box.appendChild(el('h3', { text: 'Attributes' }));
      box.appendChild(el('table', { class: 'status-table' }, attrs.map(function (k) {
        return el('tr', {}, [el('th', { text: k }), el('td', { text: String(n.attributes[k]) })]);
      })));
    }
    box.appendChild(el('div', { class: 'actions' }, [
      el('button', { type: 'button', text: 'Expand neighbours', onclick: function () { expand(id); } }),
      has('knowledge_get_entity_timeline') ? el('button', { type: 'button', text: 'Timeline', onclick: function () { location.hash = '#timeline/' + encodeURIComponent(id); } }) : null
    ]));
    var factsBox = el('ul', { class: 'list', id: 'detail-facts' });
    box.appendChild(el('h3', { text: S.at == null ? 'Facts (current and superseded)' : 'Facts at ' + G.formatTime(S.at) }));
    box.appendChild(factsBox);
    var epBox = el('ul', { class: 'list' });
    box.appendChild(el('h3', { text: 'Episodes mentioning it' }));
    box.appendChild(epBox);
    var params = Object.assign({ entity_uuid: id, num_results: 200 }, shapes.timeParams(S.at, S.axis));
    var facts = api.call('knowledge_get_entity_neighbors', params).then(function (res) {
      var nb = shapes.neighbours(res, S.at);
      remember(nb.nodes);
      if (!nb.edges.length) factsBox.appendChild(el('li', { class: 'hint', text: 'no facts at this time' }));
      nb.edges.sort(function (a, b) { return (a.superseded - b.superseded) || ((a.validFrom || 0) - (b.validFrom || 0)); });
      nb.edges.forEach(function (e) { factsBox.appendChild(factItem(e, id)); });
    }).catch(function (err) { factsBox.appendChild(errorBox(err)); });
    var eps = episodesFor(n.group).then(function (all) {
      var mine = all.filter(function (e) { return e.mentions.indexOf(id) >= 0; });
      if (!mine.length) epBox.appendChild(el('li', { class: 'hint', text: 'none among the 500 most recent of its group' }));
      episodeLines(mine.slice(0, 20)).forEach(function (li) { epBox.appendChild(li); });
    }).catch(function (err) { epBox.appendChild(errorBox(err)); });
    return Promise.all([facts, eps]);
  }

  /* Episode lines under one heading per source file: the path (`docs/a.md` of a source
   * `docs/a.md:Intro`) is said once, each line keeps only what differs from its name. */
  function episodeLines(eps) {
    var out = [], path = null;
    eps.forEach(function (e) {
      var src = String(e.source || ''), colon = src.lastIndexOf(':');
      var file = colon > 0 && !/^[a-z]+$/.test(src.slice(0, colon)) ? src.slice(0, colon) : '';
      if (file && file !== path) out.push(el('li', { class: 'episode-file' }, [el('code', { text: file })]));
      path = file || null;
      var tail = file ? src.slice(colon + 1) : src;
      var name = file && e.name.indexOf(file) === 0 ? e.name.slice(file.length).replace(/^[\s:#›>\-]+/, '') || e.name : e.name;
      out.push(el('li', { class: 'episode' + (file ? ' in-file' : '') }, [
        el('strong', { text: name }), ' ',
        el('span', { class: 'hint', text: G.formatTime(e.validAt || e.createdAt) + (tail && tail !== name && tail !== e.name ? ' · ' + tail : '') }),
        el('div', { class: 'content', text: e.content })
      ]));
    });
    return out;
  }

  // -- explore: search ---------------------------------------------------------------------------

  function search(query) {
    var box = clear($('results'));
    box.appendChild(el('p', { class: 'hint', text: 'searching…' }));
    var g = groupIds();
    function maybe(method, params) {
      if (!has(method)) return Promise.resolve({});
      return api.call(method, params).catch(function (err) { return { _error: err }; });
    }
    return Promise.all([
      maybe('knowledge_find_entities', Object.assign({ query: query, num_results: 20 }, g)),
      maybe('knowledge_find_relationships', Object.assign({ query: query, num_results: 20 }, g)),
      maybe('knowledge_search_passages', Object.assign({ query: query, num_results: 5 }, g))
    ]).then(function (res) {
      var found = shapes.search(res[0], res[1], res[2]);
      remember(found.entities);
      clear(box);
      res.forEach(function (r) { if (r._error) box.appendChild(errorBox(r._error)); });
      box.appendChild(el('h3', { text: 'Entities (' + found.entities.length + ')' }));
      box.appendChild(el('ul', { class: 'list', id: 'search-entities' }, found.entities.map(function (n) {
        var dot = el('span', { class: 'dot' });
        dot.style.background = G.colorFor(n.type);
        return el('li', { class: 'result', 'data-uuid': n.id, onclick: function () { focusNode(n.id); } }, [
          dot, el('strong', { text: n.name }), ' ',
          n.code ? codeInfo(n, false) : el('span', { class: 'hint', text: n.type }),
          n.summary && !n.code ? el('div', { class: 'hint', text: n.summary.slice(0, 140) }) : null,
          n.code && n.code.signature ? el('div', { class: 'hint', text: n.code.signature.slice(0, 140) }) : null
        ]);
      })));
      box.appendChild(el('h3', { text: 'Facts (' + found.facts.length + ')' }));
      box.appendChild(el('ul', { class: 'list' }, found.facts.map(function (e) {
        return el('li', { class: 'result fact ' + (e.superseded ? 'superseded' : 'current'), title: G.validityText(e),
                          onclick: function () { focusNode(e.source); } }, [
          el('span', { class: 'pred', text: e.label }),
          e.superseded ? el('span', { class: 'badge superseded', text: 'superseded' }) : null,
          el('div', { text: e.fact })
        ]);
      })));
      if (found.passages.length) {
        box.appendChild(el('h3', { text: 'Passages' }));
        box.appendChild(el('ul', { class: 'list' }, found.passages.map(function (p) {
          return el('li', { class: 'episode' }, [el('strong', { text: p.name }), ' ',
            el('span', { class: 'hint', text: p.score != null ? 'score ' + p.score.toFixed(2) : '' }),
            el('div', { class: 'content', text: p.content })]);
        })));
      }
      S.highlighted = found.entities.map(function (n) { return n.id; });
      var missing = found.entities.filter(function (n) { return !view.byId.has(n.id); });
      missing.forEach(function (n) { S.extraNodes.set(n.id, n); });
      if (missing.length) render(); else view.highlight(S.highlighted);
      if (found.entities.length === 1) focusNode(found.entities[0].id);
    });
  }

  // -- explore: time -----------------------------------------------------------------------------

  function toLocalInput(ms) { return new Date(ms).toISOString().slice(0, 19); }

  function syncTimeControls() {
    var lo = S.range[0], hi = S.range[1];
    var slider = $('time-slider');
    slider.value = S.at == null ? '1000' : String(Math.round((S.at - lo) / Math.max(1, hi - lo) * 1000));
    $('time-input').value = toLocalInput(S.at == null ? Date.now() : S.at);
    var cap = $('time-caption');
    if (S.at == null) {
      cap.textContent = 'Now: current facts' + (showSuperseded(S.edges.length) ? ', and superseded ones in red dashed lines.' : ' (superseded ones on demand: tick "superseded facts").');
      cap.classList.remove('past');
    } else {
      cap.textContent = (S.axis === 'known'
        ? 'As known at ' + G.formatTime(S.at) + ' UTC (system time): what the graph held then.'
        : 'As of ' + G.formatTime(S.at) + ' UTC (valid time): facts true in the world then.');
      cap.classList.add('past');
    }
  }

  var reloadSoon = debounce(function () {
    loadGraph().then(function () { if (S.selected) showDetails(S.selected); });
  }, 200);

  function setTime(at) {
    S.at = at;
    syncTimeControls();
    reloadSoon();
  }

  // -- timeline ----------------------------------------------------------------------------------

  function showTimeline(params) {
    var box = clear($('timeline'));
    if (!has('knowledge_get_entity_timeline')) {
      box.appendChild(el('p', { class: 'hint', text: 'This server does not offer knowledge_get_entity_timeline.' }));
      return Promise.resolve();
    }
    box.appendChild(el('p', { class: 'hint', text: 'loading…' }));
    // After the first graph load: it names the other ends of the facts.
    return Promise.all([api.call('knowledge_get_entity_timeline', params), S.loaded]).then(function (all) {
      var tl = shapes.timeline(all[0]);
      remember([tl.entity]);
      $('timeline-entity').value = tl.entity.name;
      // A code symbol's facts start and end at commits: name them (the group's git episodes).
      var commits = tl.entity.code ? episodesFor(tl.entity.group) : Promise.resolve([]);
      return commits.then(function (eps) {
        tl.commits = new Map();
        eps.forEach(function (ep) {
          var c = shapes.commitOf(ep);
          if (c && ep.validAt != null) tl.commits.set(ep.validAt, c);
        });
        return linkedFacts(tl).then(function () { renderTimeline(clear(box), tl); });
      });
    }).catch(function (err) { clear(box).appendChild(errorBox(err)); });
  }

  function focusTimelineOf(uuid) { location.hash = '#timeline/' + encodeURIComponent(uuid); }

  /* The facts a timeline's facts supersede or are superseded by that are not on it: read by uuid
   * (with their ends' names), so links show names. */
  function linkedFacts(tl) {
    var onIt = new Set(tl.facts.map(function (f) { return f.id; }));
    var want = [];
    tl.facts.forEach(function (f) {
      f.supersededBy.concat(f.supersedes).forEach(function (u) { if (!onIt.has(u) && want.indexOf(u) < 0) want.push(u); });
    });
    tl.others = new Map();
    if (!want.length || !has('knowledge_get_edges_by_uuids')) return Promise.resolve();
    return api.call('knowledge_get_edges_by_uuids', { uuids: want }).then(function (res) {
      (res.edges || res.facts || []).forEach(function (raw) {
        var f = shapes.edge(raw, null);
        tl.others.set(f.id, f);
      });
      var unknown = [];
      tl.others.forEach(function (f) {
        [f.source, f.target].forEach(function (u) { if (u && !S.known.has(u) && unknown.indexOf(u) < 0) unknown.push(u); });
      });
      return Promise.all(unknown.map(function (u) {
        return api.call('knowledge_get_entity_neighbors', { entity_uuid: u, num_results: 1 }).then(function (nb) {
          remember(shapes.neighbours(nb, null).nodes);
        }).catch(function () { return null; });
      }));
    }).catch(function () { return null; });
  }

  function renderTimeline(box, tl) {
    var e = tl.entity, now = Date.now();
    box.appendChild(el('div', { class: 'tl-head' }, [
      el('h2', { text: e.name }),
      el('div', {}, e.labels.map(function (l) { return el('span', { class: 'chip', text: l }); })),
      e.code ? codeInfo(e, true) : e.summary ? el('p', { text: e.summary }) : null,
      el('p', { class: 'hint', text: tl.facts.length + ' facts, ' + tl.facts.filter(function (f) { return f.superseded; }).length + ' no longer current' })
    ]));
    if (!tl.facts.length) return;
    var lo = Infinity, hi = -Infinity;
    tl.facts.forEach(function (f) {
      var start = f.validFrom != null ? f.validFrom : f.learnedAt;
      if (start != null) { lo = Math.min(lo, start); hi = Math.max(hi, start); }
      if (f.validTo != null) hi = Math.max(hi, f.validTo);
    });
    if (!isFinite(lo)) { lo = now - DAY; hi = now; }
    // A fact still valid runs to today: the axis does too, so its bar does not stop early.
    if (tl.facts.some(function (f) { return f.validTo == null && !f.superseded; })) hi = Math.max(hi, now);
    hi = Math.max(hi, lo + DAY);
    var span = hi - lo, pad = span * 0.05;
    lo -= pad; hi += pad; span = hi - lo;
    var pos = function (t) { return Math.max(0, Math.min(100, (t - lo) / span * 100)); };
    var axis = el('div', { class: 'tl-axis' });
    for (var i = 0; i <= 4; i++) {
      // The end ticks align inwards (first left, last right) so no date is clipped at an edge.
      var tick = el('span', { class: i === 0 ? 'tl-first' : i === 4 ? 'tl-last' : '',
        text: G.formatTime(lo + span * i / 4).slice(0, 10) });
      tick.style.left = (i * 25) + '%';
      axis.appendChild(tick);
    }
    box.appendChild(axis);
    var byId = new Map(tl.facts.map(function (f) { return [f.id, f]; }));
    function commitText(t) {
      var c = t != null && tl.commits ? tl.commits.get(t) : null;
      return c ? c.sha.slice(0, 10) + ' ' + c.subject.slice(0, 70) : null;
    }
    function commitsOf(f) {
      var from = commitText(f.validFrom), to = commitText(f.validTo);
      if (!from && !to) return null;
      return el('div', { class: 'tl-commits' }, [
        from ? el('span', { class: 'tl-commit-start', text: 'appeared in ' + from }) : null,
        from && to ? ' · ' : null,
        to ? el('span', { class: 'tl-commit-end', text: 'ended in ' + to }) : null
      ]);
    }
    /* A fact named by its text ("Alice works at Globex"), else by its ends and predicate
     * ("Alice WORKS_AT Globex"); never by a uuid. */
    function factName(f) {
      var text = f.fact ? (f.fact.length > 80 ? f.fact.slice(0, 79) + '…' : f.fact)
        : nameOf(f.source) + ' ' + f.label + ' ' + nameOf(f.target);
      return text + (f.validFrom != null ? ' (from ' + G.formatTime(f.validFrom) + ')' : '');
    }
    function linkTo(uuid) {
      var f = byId.get(uuid) || (tl.others && tl.others.get(uuid));
      return el('a', { class: 'tl-link', 'data-link': uuid, text: f ? factName(f) : 'another fact', title: f ? (f.fact || '') + ' — ' + G.validityText(f) : uuid, onclick: function () {
        var row = box.querySelector('[data-fact="' + uuid + '"]');
        if (row) row.scrollIntoView({ block: 'center' });
        else if (f && f.source) focusTimelineOf(f.source === e.id ? f.target : f.source);
      } });
    }
    tl.facts.forEach(function (f) {
      var cls = f.superseded ? f.status : 'current';
      var other = f.source === e.id ? f.target : f.source;
      var start = f.validFrom != null ? f.validFrom : (f.learnedAt != null ? f.learnedAt : lo);
      var end = f.validTo != null ? f.validTo : hi;
      var bar = el('div', { class: 'tl-bar', title: G.validityText(f) });
      bar.style.left = pos(start) + '%';
      bar.style.width = Math.max(0.4, pos(end) - pos(start)) + '%';
      var links = [];
      if (f.supersededBy.length) {
        links.push('superseded by ');
        f.supersededBy.forEach(function (u, i) { if (i) links.push(', '); links.push(linkTo(u)); });
      }
      if (f.supersedes.length) {
        if (links.length) links.push(' · ');
        links.push('supersedes ');
        f.supersedes.forEach(function (u, i) { if (i) links.push(', '); links.push(linkTo(u)); });
      }
      box.appendChild(el('div', { class: 'tl-row tl-fact fact ' + cls, 'data-fact': f.id, 'data-status': f.status }, [
        el('div', { class: 'tl-label' }, [
          el('span', { class: 'pred', text: f.label }), f.source === e.id ? ' → ' : ' ← ',
          el('span', { text: nameOf(other) }),
          el('span', { class: 'badge ' + cls, text: f.status }),
          f.fact ? el('div', { text: f.fact }) : null,
          el('span', { class: 'when', text: G.validityText(f) }),
          commitsOf(f),
          links.length ? el('div', { class: 'tl-links' }, links) : null
        ]),
        el('div', { class: 'tl-track' }, [bar])
      ]));
    });
  }

  // -- changes -----------------------------------------------------------------------------------

  function showChanges() {
    var box = clear($('changes'));
    if (!has('knowledge_get_changes')) {
      box.appendChild(el('p', { class: 'hint', text: 'This server does not offer knowledge_get_changes.' }));
      return Promise.resolve();
    }
    var since = $('changes-since').value, until = $('changes-until').value;
    var params = Object.assign({ since: since + 'T00:00:00Z' }, groupIds());
    if (until) params.until = until + 'T00:00:00Z';
    return Promise.all([api.call('knowledge_get_changes', params), S.loaded]).then(function (all) {
      var res = all[0];
      var ch = shapes.changes(res);
      var counts = {};
      ch.entries.forEach(function (c) { counts[c.kind] = (counts[c.kind] || 0) + 1; });
      box.appendChild(el('p', {}, Object.keys(counts).map(function (k) {
        return el('span', { class: 'badge ' + k, text: counts[k] + ' ' + k });
      })));
      if (ch.truncated) box.appendChild(el('p', { class: 'hint', text: 'More changes exist: narrow the window.' }));
      if (!ch.entries.length) { box.appendChild(el('p', { class: 'hint', text: 'No fact changed in this window.' })); return; }
      box.appendChild(el('table', {}, [
        el('tr', {}, ['when (UTC)', 'change', 'between', 'fact'].map(function (h) { return el('th', { text: h }); }))
      ].concat(ch.entries.map(function (c) {
        var e = c.edge;
        return el('tr', { class: 'change ' + c.kind, 'data-kind': c.kind }, [
          el('td', { text: G.formatTime(c.at) }),
          el('td', {}, [el('span', { class: 'badge ' + c.kind, text: c.kind })]),
          el('td', {}, [el('strong', { text: nameOf(e.source) }), ' ', el('span', { class: 'pred', text: e.label }), ' ', el('strong', { text: nameOf(e.target) })]),
          el('td', { text: e.fact || '' })
        ]);
      }))));
    }).catch(function (err) { box.appendChild(errorBox(err)); });
  }

  // -- cypher ------------------------------------------------------------------------------------

  /* Column names from the RETURN clause (the API returns rows only); numbers when unsure. */
  function columnsOf(query, width) {
    var m = /\bRETURN\b([\s\S]*)$/i.exec(query);
    var names = [];
    if (m) {
      var body = m[1].split(/\b(ORDER\s+BY|SKIP|LIMIT|UNION)\b/i)[0];
      var depth = 0, cur = '';
      for (var i = 0; i < body.length; i++) {
        var ch = body[i];
        if ('([{'.indexOf(ch) >= 0) depth++;
        if (')]}'.indexOf(ch) >= 0) depth--;
        if (ch === ',' && depth === 0) { names.push(cur); cur = ''; } else cur += ch;
      }
      names.push(cur);
      names = names.map(function (n) {
        var alias = /\bAS\s+(\S+)\s*$/i.exec(n.trim());
        return alias ? alias[1] : n.trim().replace(/^DISTINCT\s+/i, '');
      });
    }
    if (names.length !== width) names = Array.from({ length: width }, function (_, i) { return String(i + 1); });
    return names;
  }

  function runCypher() {
    var query = $('cypher-query').value;
    var box = clear($('cypher-result'));
    box.appendChild(el('p', { class: 'hint', text: 'running…' }));
    var started = performance.now();
    return api.call('knowledge_query_cypher', { query: query }).then(function (res) {
      var rows = res.rows || [];
      clear(box);
      box.appendChild(el('p', { class: 'hint', text: rows.length + ' rows in ' + Math.round(performance.now() - started) + ' ms' }));
      var width = rows.reduce(function (w, r) { return Math.max(w, r.length); }, 0);
      if (!width) return;
      box.appendChild(el('table', { class: 'cypher-table' }, [
        el('tr', {}, columnsOf(query, width).map(function (c) { return el('th', { text: c }); }))
      ].concat(rows.map(function (r) {
        return el('tr', {}, r.map(function (cell) { return el('td', { text: cell }); }));
      }))));
    }).catch(function (err) { clear(box).appendChild(errorBox(err)); });
  }

  // -- status ------------------------------------------------------------------------------------

  /* One timestamp format on the status page, whatever format the wire used: 'YYYY-MM-DD HH:MM:SS UTC'. */
  function utcText(ms) {
    return ms == null ? '–' : new Date(ms).toISOString().slice(0, 19).replace('T', ' ') + ' UTC';
  }

  function loadStatusView() {
    var box = $('status');
    return api.call('knowledge_status', {}).then(function (raw) {
      var s = shapes.status(raw);
      clear(box);
      if (s.degraded) box.appendChild(el('div', { class: 'error', text: 'Degraded: ' + s.reason + ' (the database is not open; see knowledge_recover)' }));
      box.appendChild(el('div', { class: 'cards' }, s.counts.map(function (c) {
        return el('div', { class: 'card' }, [el('div', { class: 'n', text: c[1] == null ? '–' : String(c[1]) }), el('div', { class: 'k', text: c[0] })]);
      }).concat([
        el('div', { class: 'card', title: 'the created_at of the oldest and of the newest episode' }, [
          el('div', { class: 'k', text: 'oldest / newest episode date' }),
          el('div', { id: 'episode-times', text: utcText(s.firstIndexed) + ' / ' + utcText(s.lastIndexed) })]),
        el('div', { class: 'card' }, [el('div', { class: 'k', text: 'database' }), el('code', { text: s.databasePath })])
      ])));
      box.appendChild(el('h2', { text: 'Models' }));
      box.appendChild(el('div', { class: 'cards' }, s.providers.map(function (p) {
        return el('div', { class: 'card provider' + (p.fallback ? ' fallback' : ''), 'data-role': p.role }, [
          el('div', { class: 'k', text: p.role }), el('div', { text: p.name }),
          el('div', { class: 'hint', text: p.fallback ? (p.note || 'offline fallback') : (p.note || 'in use') })
        ]);
      })));
      box.appendChild(el('h2', { text: 'Groups and write-ahead-log positions' }));
      box.appendChild(el('table', { class: 'status-table', id: 'wal-groups' }, [
        el('tr', {}, ['group', 'applied seq', 'max seq', 'generation', 'hydration'].map(function (h) { return el('th', { text: h }); }))
      ].concat(s.groups.map(function (g) {
        return el('tr', {}, [g.group, g.applied, g.max, g.generationStatus, g.hydration].map(function (v) {
          return el('td', { text: v == null ? 'null' : String(v) });
        }));
      }))));
      box.appendChild(el('h2', { text: 'Everything knowledge_status says' }));
      box.appendChild(el('pre', { text: JSON.stringify(s.raw, null, 2) }));
    }).catch(function (err) { clear(box).appendChild(errorBox(err)); });
  }

  // -- start -------------------------------------------------------------------------------------

  function askToken() {
    return new Promise(function (resolve) {
      var dialog = $('token-dialog');
      $('token-input').value = '';
      $('token-cancel').onclick = function () { dialog.close(); resolve(null); };
      $('token-form').onsubmit = function () { resolve($('token-input').value.trim() || null); };
      dialog.showModal();
    });
  }

  /* The group picker lists the groups of the entities loaded for "all groups". */
  function fillGroups(nodes) {
    var names = Array.from(new Set(nodes.map(function (n) { return n.group; }))).sort();
    var select = $('group');
    while (select.options.length > 1) select.remove(1);
    names.forEach(function (g) { select.appendChild(el('option', { value: g, text: g })); });
    select.value = S.group;
  }

  function bind() {
    $('search-form').addEventListener('submit', function (ev) {
      ev.preventDefault();
      var q = $('search').value.trim();
      if (q) search(q);
    });
    $('time-slider').addEventListener('input', function () {
      var v = Number($('time-slider').value);
      if (v >= 1000) { setTime(null); return; }
      setTime(Math.round(S.range[0] + (S.range[1] - S.range[0]) * v / 1000));
    });
    $('time-input').addEventListener('change', function () {
      var v = $('time-input').value;
      if (!v) return;
      var ms = Date.parse(v.length === 16 ? v + ':00Z' : v + 'Z');
      if (!isNaN(ms)) setTime(ms);
    });
    $('known-at').addEventListener('change', function () {
      S.axis = $('known-at').checked ? 'known' : 'valid';
      syncTimeControls();
      if (S.at != null) reloadSoon();
    });
    $('time-now').addEventListener('click', function () { setTime(null); });
    $('node-limit').addEventListener('change', function () { S.limit = Number($('node-limit').value); render(); });
    $('show-superseded').addEventListener('change', function () {
      S.superseded = $('show-superseded').checked;
      render();
      syncTimeControls();
    });
    $('refit').addEventListener('click', function () { view.refit(); });
    $('group').addEventListener('change', function () {
      S.group = $('group').value;
      S.extraNodes = new Map(); S.extraEdges = new Map(); S.expanded = new Set();
      loadGraph();
    });
    $('timeline-form').addEventListener('submit', function (ev) {
      ev.preventDefault();
      var name = $('timeline-entity').value.trim();
      if (!name) return;
      var match = Array.from(S.known.values()).filter(function (n) {
        return n.name.toLowerCase() === name.toLowerCase() && (!S.group || n.group === S.group);
      })[0];
      if (match || S.group) {
        showTimeline(match ? { entity_uuid: match.id } : { name: name, group_id: S.group });
        return;
      }
      // No group chosen and not on the canvas: the entity of that exact name, in any group.
      api.call('knowledge_find_entities', { query: name, num_results: 20 }).then(function (res) {
        var hit = shapes.search(res, {}, {}).entities.filter(function (n) {
          return n.name.toLowerCase() === name.toLowerCase();
        })[0];
        if (hit) { remember([hit]); showTimeline({ entity_uuid: hit.id }); return; }
        clear($('timeline')).appendChild(el('p', { class: 'hint', text: 'No entity named ' + name + '; choose its group.' }));
      }).catch(function (err) { clear($('timeline')).appendChild(errorBox(err)); });
    });
    $('changes-form').addEventListener('submit', function (ev) { ev.preventDefault(); showChanges(); });
    $('cypher-form').addEventListener('submit', function (ev) { ev.preventDefault(); runCypher(); });
    $('cypher-query').addEventListener('keydown', function (ev) {
      if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); runCypher(); }
    });
    global.addEventListener('hashchange', route);
  }

  function start() {
    // Ask for the graph first: the requests run while the page sets itself up.
    S.loaded = loadGraph();
    view = new G.GraphView($('graph'), { tooltip: $('tooltip') });
    view.on('select', function (node) {
      S.selected = node ? node.id : null;
      if (node) showDetails(node.id); else clear($('details'));
    });
    view.on('expand', function (node) { expand(node.id); });
    api.onTokenNeeded(askToken);
    bind();
    syncTimeControls();
    var conn = $('conn-state');
    var waited = false;
    function connect() {
      return api.health().then(function (h) {
        S.methods = new Set(h.methods || []);
        S.scopes = h.scopes || [];
        $('tab-cypher').hidden = S.scopes.indexOf('cypher') < 0;
        conn.textContent = h.state + ' · ' + S.scopes.join(', ') + (h.auth ? ' · token' : '');
        conn.classList.toggle('bad', h.state !== 'healthy');
        if (h.state === 'initializing') {
          waited = true;
          return new Promise(function (r) { setTimeout(r, 500); }).then(connect);
        }
        return h;
      });
    }
    // The graph is asked for at once, with the health probe; if the service was still opening
    // its database it is asked for again once it is ready.
    S.ready = connect()
      .then(function () {
        if (waited) S.loaded = loadGraph();
        route();
        return S.loaded;
      })
      .catch(function (err) {
        conn.textContent = 'unreachable';
        conn.classList.add('bad');
        clear($('results')).appendChild(errorBox(err));
      });
  }

  // For tests and the curious: the state and the graph view.
  global.lcgApp = { state: S, view: function () { return view; }, search: search, focusNode: focusNode, setTime: setTime };
  start();
})(window);
