/* lcg graph view: a force-directed layout drawn on a canvas, with no dependencies.
 *
 * Shared by the browser UI and by `lcg export-html` (inlined there), so it is a classic script
 * defining `window.LcgGraph`. It knows only normalised data:
 *   node {id, name, type, group}
 *   edge {id, source, target, label, fact, validFrom, validTo, superseded, status}
 * (the UI's shapes.js and the exporter produce these from the API's records).
 *
 * Layout: velocity Verlet with cooling (alpha), Barnes-Hut repulsion over a quadtree
 * (O(n log n) per tick), springs along edges, weak gravity to the centre. Initial positions
 * are a phyllotaxis spiral in degree order, so hubs start in the middle and the first frame is
 * meaningful before any tick has run. The first frame that draws nodes sets the performance
 * mark `lcg-first-frame`; the canvas carries data-nodes / data-edges / data-superseded counts
 * of what the last frame drew.
 *
 * Labels: only what fits. Candidates in priority order (the selected, highlighted and hovered
 * nodes, then by degree: the best-connected ones when zoomed out, every node once zoomed in)
 * are placed in screen space, each only where it overlaps no label already placed; edge labels
 * then take what room is left. A dense centre shows a few readable names, hovering or zooming
 * shows more. A label that does not fit right of its node tries the left, above and below.
 * data-labels counts the node labels drawn and data-label-boxes holds their boxes
 * ([x, y, w, h] in CSS pixels, for tests).
 *
 * Quiet nodes: a literal-looking name (True, None, 42, 1.2.3, 2024-05-01, one character) or a
 * hub (a node holding a large share of the facts) is drawn small and faint, with faint facts
 * and weak springs, and labelled last: the structure around it stays readable. data-quiet
 * counts them.
 *
 * The first frame: setData runs some layout ticks at once, fits the view and draws, so a
 * graph is on the canvas without waiting for an animation frame or any event (a plain
 * `chromium --headless --screenshot` captures it).
 */
(function (global) {
  'use strict';

  var TWO_PI = Math.PI * 2;
  var PALETTE = ['#4e79a7', '#f28e2b', '#59a14f', '#b07aa1', '#76b7b2', '#edc948',
    '#9c755f', '#ff9da7', '#8cd17d', '#86bcb6', '#d37295', '#a0cbe8', '#fabfd2', '#79706e'];
  var SUPERSEDED = '#d62728';
  var LABEL_CELL = 6; // px: the grid that records where labels already are
  var QUIET = '#b8bfc7';
  var WARMUP_MS = 60; // layout ticks run before the first frame (bounded: a huge graph gets few)
  var LITERAL = /^(true|false|none|null|nil|undefined|nan|yes|no|n\/a|[-+]?\d[\d.,_:]*%?|v?\d+(\.\d+)+([-+.][\w.]+)?|\d{4}-\d\d(-\d\d)?([ t][\d:.]+z?)?|.)$/i;

  /* Whether a name reads as a literal value rather than a thing (True, None, 0.5, 2.0.1). */
  function isLiteral(name) {
    var text = String(name == null ? '' : name).trim().replace(/^(['"`])(.*)\1$/, '$2');
    return text === '' || LITERAL.test(text);
  }
  var firstFrameMarked = false;

  // Types get palette colours in the order they are first seen (setData sees the best-connected
  // nodes first), so the commonest types never share a colour; a type keeps its colour.
  var typeColors = new Map();
  function colorFor(type) {
    if (!type || type === 'Entity') return '#9aa3ad';
    if (!typeColors.has(type)) typeColors.set(type, PALETTE[typeColors.size % PALETTE.length]);
    return typeColors.get(type);
  }

  function formatTime(ms) {
    if (ms == null || !isFinite(ms)) return '…';
    var iso = new Date(ms).toISOString();
    return iso.slice(11, 19) === '00:00:00' ? iso.slice(0, 10) : iso.slice(0, 16).replace('T', ' ');
  }

  function validityText(edge) {
    return 'valid ' + (edge.validFrom == null ? 'since ever' : 'from ' + formatTime(edge.validFrom)) +
      (edge.validTo == null ? ', still valid' : ' until ' + formatTime(edge.validTo));
  }

  // -- Barnes-Hut quadtree -------------------------------------------------------------------

  function Quad(x0, y0, size) {
    this.x0 = x0; this.y0 = y0; this.size = size;
    this.mass = 0; this.cx = 0; this.cy = 0;
    this.node = null; this.kids = null;
  }

  Quad.prototype.insert = function (n, depth) {
    if (this.mass === 0 && this.kids === null) {
      this.node = n; this.mass = 1; this.cx = n.x; this.cy = n.y;
      return;
    }
    this.cx = (this.cx * this.mass + n.x) / (this.mass + 1);
    this.cy = (this.cy * this.mass + n.y) / (this.mass + 1);
    this.mass += 1;
    if (depth > 40) return; // coincident points: keep them lumped together
    if (this.kids === null) {
      this.kids = [null, null, null, null];
      var old = this.node;
      this.node = null;
      if (old) this.child(old).insert(old, depth + 1);
    }
    this.child(n).insert(n, depth + 1);
  };

  Quad.prototype.child = function (n) {
    var half = this.size / 2;
    var i = (n.x >= this.x0 + half ? 1 : 0) + (n.y >= this.y0 + half ? 2 : 0);
    if (!this.kids[i]) {
      this.kids[i] = new Quad(this.x0 + (i & 1 ? half : 0), this.y0 + (i & 2 ? half : 0), half);
    }
    return this.kids[i];
  };

  Quad.prototype.repel = function (n, strength, theta2) {
    if (this.mass === 0 || this.node === n) return;
    var dx = this.cx - n.x, dy = this.cy - n.y;
    var d2 = dx * dx + dy * dy;
    if (this.kids === null || (this.size * this.size) / (d2 || 1e-9) < theta2) {
      if (d2 < 1) { dx = (Math.random() - 0.5); dy = (Math.random() - 0.5); d2 = 1; }
      var f = strength * this.mass / d2;
      n.vx -= dx * f; n.vy -= dy * f;
      return;
    }
    for (var i = 0; i < 4; i++) if (this.kids[i]) this.kids[i].repel(n, strength, theta2);
  };

  // -- the view ------------------------------------------------------------------------------

  function GraphView(canvas, options) {
    options = options || {};
    this.canvas = canvas;
    this.ctx = canvas.getContext('2d');
    this.tooltip = options.tooltip || null;
    this.listeners = {};
    this.nodes = [];
    this.edges = [];
    this.byId = new Map();
    this.selected = null;
    this.highlighted = new Set();
    this.alpha = 0;
    this.scale = 1; this.tx = 0; this.ty = 0;
    this.autoFit = true;
    this.hover = null; // the id of the node under the pointer
    this.ranked = []; // nodes by degree, best-connected first: the label candidates
    this.labelWidths = new Map(); // name -> width in px at the label font (measured once)
    this.shownLabels = new Set(); // ids of the nodes the last frame labelled
    this.frameRequested = false;
    this.dpr = global.devicePixelRatio || 1;
    this.bindEvents();
    this.resize();
    var self = this;
    if (global.ResizeObserver) {
      new global.ResizeObserver(function () { self.resize(); self.requestFrame(); })
        .observe(canvas.parentElement || canvas);
    }
  }

  GraphView.prototype.on = function (event, fn) {
    (this.listeners[event] = this.listeners[event] || []).push(fn);
    return this;
  };

  GraphView.prototype.emit = function (event, arg) {
    (this.listeners[event] || []).forEach(function (fn) { fn(arg); });
  };

  GraphView.prototype.resize = function () {
    var rect = this.canvas.getBoundingClientRect();
    this.width = Math.max(1, rect.width);
    this.height = Math.max(1, rect.height);
    this.canvas.width = Math.round(this.width * this.dpr);
    this.canvas.height = Math.round(this.height * this.dpr);
  };

  /* Replace the graph. Nodes already shown keep their positions (so a time change or an
   * expansion does not reshuffle the picture); new nodes start on the spiral, or next to a
   * known neighbour. */
  GraphView.prototype.setData = function (nodes, edges) {
    var old = this.byId;
    var byId = new Map();
    var kept = [];
    nodes.forEach(function (n) {
      if (byId.has(n.id)) return;
      var prev = old.get(n.id);
      var node = {
        id: n.id, name: n.name, type: n.type, group: n.group, data: n,
        x: prev ? prev.x : NaN, y: prev ? prev.y : NaN, vx: 0, vy: 0, degree: 0, fixed: false,
        color: colorFor(n.type)
      };
      byId.set(n.id, node);
      kept.push(node);
    });
    var links = [];
    var pairs = new Map();
    edges.forEach(function (e) {
      var s = byId.get(e.source), t = byId.get(e.target);
      if (!s || !t) return;
      s.degree++; if (t !== s) t.degree++;
      var key = s.id < t.id ? s.id + '|' + t.id : t.id + '|' + s.id;
      var siblings = pairs.get(key) || [];
      var link = { id: e.id, s: s, t: t, data: e, superseded: !!e.superseded, bend: 0 };
      siblings.push(link);
      pairs.set(key, siblings);
      links.push(link);
    });
    pairs.forEach(function (siblings) {
      var k = siblings.length;
      siblings.forEach(function (l, i) { l.bend = (i - (k - 1) / 2) * 28; });
    });
    this.placeNew(kept, links);
    this.nodes = kept;
    this.edges = links;
    this.byId = byId;
    this.markQuiet();
    if (this.selected && !byId.has(this.selected)) this.selected = null;
    this.labelled = this.pickLabelled();
    // Quiet nodes are labelled last: after every other node of any degree.
    this.ranked = kept.slice().sort(function (a, b) { return (a.quiet - b.quiet) || (b.degree - a.degree); });
    this.alpha = Math.max(this.alpha, old.size ? 0.5 : 1);
    this.warmUp(old.size ? 0 : WARMUP_MS);
    if (this.autoFit) this.fit();
    this.draw(); // the first frame: laid out, fitted, drawn now (no animation frame needed)
    this.requestFrame();
  };

  /* Literal-looking nodes and hubs (a degree of at least 20 and 5% of the facts) are quiet. */
  GraphView.prototype.markQuiet = function () {
    var hub = Math.max(20, this.edges.length * 0.05);
    var quiet = 0;
    this.nodes.forEach(function (p) {
      p.literal = isLiteral(p.name);
      p.hub = p.degree >= hub;
      p.quiet = p.literal || p.hub;
      if (p.quiet) quiet++;
    });
    this.edges.forEach(function (l) { l.quiet = l.s.quiet || l.t.quiet; });
    this.quietCount = quiet;
  };

  /* Layout ticks for up to `ms` milliseconds, now. */
  GraphView.prototype.warmUp = function (ms) {
    if (!ms || !this.nodes.length) return;
    var started = global.performance.now(), ticks = 0;
    do { this.tick(); ticks++; } while (this.alpha > 0 && ticks < 300 && global.performance.now() - started < ms);
  };

  GraphView.prototype.placeNew = function (nodes, links) {
    var fresh = nodes.filter(function (n) { return isNaN(n.x); });
    if (!fresh.length) return;
    var anchored = new Map();
    links.forEach(function (l) {
      if (isNaN(l.s.x) && !isNaN(l.t.x)) anchored.set(l.s, l.t);
      if (isNaN(l.t.x) && !isNaN(l.s.x)) anchored.set(l.t, l.s);
    });
    fresh.sort(function (a, b) { return b.degree - a.degree; });
    var golden = Math.PI * (3 - Math.sqrt(5));
    var spiral = 0;
    fresh.forEach(function (n) {
      var anchor = anchored.get(n);
      if (anchor) {
        var a = Math.random() * TWO_PI;
        n.x = anchor.x + Math.cos(a) * 40; n.y = anchor.y + Math.sin(a) * 40;
        return;
      }
      var r = 12 * Math.sqrt(0.5 + spiral), angle = spiral * golden;
      n.x = r * Math.cos(angle); n.y = r * Math.sin(angle);
      spiral++;
    });
  };

  GraphView.prototype.pickLabelled = function () {
    var ranked = this.nodes.slice().sort(function (a, b) { return b.degree - a.degree; });
    var set = new Set();
    ranked = ranked.filter(function (p) { return !p.literal; }); // hubs stay, labelled last
    var limit = this.nodes.length <= 150 ? this.nodes.length : 40;
    for (var i = 0; i < limit && i < ranked.length; i++) set.add(ranked[i].id);
    return set;
  };

  GraphView.prototype.reheat = function (alpha) {
    this.alpha = Math.max(this.alpha, alpha);
    this.requestFrame();
  };

  GraphView.prototype.tick = function () {
    var nodes = this.nodes, n = nodes.length;
    if (!n) return;
    var alpha = this.alpha;
    var minX = Infinity, minY = Infinity, maxX = -Infinity, maxY = -Infinity, i;
    for (i = 0; i < n; i++) {
      var p = nodes[i];
      if (p.x < minX) minX = p.x; if (p.x > maxX) maxX = p.x;
      if (p.y < minY) minY = p.y; if (p.y > maxY) maxY = p.y;
    }
    var root = new Quad(minX - 1, minY - 1, Math.max(maxX - minX, maxY - minY) + 2);
    for (i = 0; i < n; i++) root.insert(nodes[i], 0);
    var charge = 60 * alpha;
    for (i = 0; i < n; i++) root.repel(nodes[i], charge, 0.81);
    var links = this.edges;
    for (i = 0; i < links.length; i++) {
      var l = links[i], s = l.s, t = l.t;
      if (s === t) continue;
      var dx = t.x + t.vx - s.x - s.vx, dy = t.y + t.vy - s.y - s.vy;
      var d = Math.sqrt(dx * dx + dy * dy) || 1;
      // A quiet end pulls weakly from farther: a hub or a literal does not knot the graph.
      var k = (d - (l.quiet ? 140 : 70)) / d * alpha * (l.quiet ? 0.1 : 0.5) / Math.min(s.degree, t.degree);
      dx *= k; dy *= k;
      t.vx -= dx * 0.5; t.vy -= dy * 0.5; s.vx += dx * 0.5; s.vy += dy * 0.5;
    }
    var gravity = 0.02 * alpha;
    for (i = 0; i < n; i++) {
      var q = nodes[i];
      if (q.fixed) { q.vx = q.vy = 0; continue; }
      q.vx -= q.x * gravity; q.vy -= q.y * gravity;
      q.vx *= 0.6; q.vy *= 0.6;
      q.x += q.vx; q.y += q.vy;
    }
    this.alpha *= 0.975;
    if (this.alpha < 0.005) this.alpha = 0;
  };

  GraphView.prototype.requestFrame = function () {
    if (this.frameRequested) return;
    this.frameRequested = true;
    var self = this;
    global.requestAnimationFrame(function () {
      self.frameRequested = false;
      if (self.alpha > 0) {
        var started = global.performance.now();
        do { self.tick(); } while (self.alpha > 0 && self.nodes.length < 300 &&
                                   global.performance.now() - started < 8);
      }
      if (self.autoFit) self.fit();
      self.draw();
      if (self.alpha > 0) self.requestFrame();
    });
  };

  GraphView.prototype.fit = function () {
    if (!this.nodes.length) return;
    var minX = Infinity, minY = Infinity, maxX = -Infinity, maxY = -Infinity;
    this.nodes.forEach(function (p) {
      if (p.x < minX) minX = p.x; if (p.x > maxX) maxX = p.x;
      if (p.y < minY) minY = p.y; if (p.y > maxY) maxY = p.y;
    });
    var w = Math.max(maxX - minX, 1) + 80, h = Math.max(maxY - minY, 1) + 80;
    this.scale = Math.min(this.width / w, this.height / h, 2.5);
    this.tx = this.width / 2 - (minX + maxX) / 2 * this.scale;
    this.ty = this.height / 2 - (minY + maxY) / 2 * this.scale;
  };

  GraphView.prototype.radius = function (node) {
    if (node.literal) return 3;
    return 4 + Math.min(node.hub ? 4 : 10, Math.sqrt(node.degree) * 1.6);
  };

  GraphView.prototype.controlPoint = function (l) {
    var mx = (l.s.x + l.t.x) / 2, my = (l.s.y + l.t.y) / 2;
    if (!l.bend) return [mx, my];
    var dx = l.t.x - l.s.x, dy = l.t.y - l.s.y, d = Math.sqrt(dx * dx + dy * dy) || 1;
    var sign = l.s.id < l.t.id ? 1 : -1; // the same side for both directions of a pair
    return [mx - dy / d * l.bend * sign, my + dx / d * l.bend * sign];
  };

  GraphView.prototype.draw = function () {
    var ctx = this.ctx, dpr = this.dpr, scale = this.scale, self = this;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, this.width, this.height);
    ctx.setTransform(dpr * scale, 0, 0, dpr * scale, dpr * this.tx, dpr * this.ty);
    var showEdgeLabels = this.edges.length <= 250 || scale > 1.6;
    var superseded = 0;
    // Batched: one path per pass and one per node colour, so a frame is a few dozen canvas calls
    // however large the graph (software rendering makes each stroke/fill call costly).
    ctx.lineWidth = 1.2 / scale;
    // Three passes: facts touching a quiet node (faint), the others, the superseded ones.
    ['quiet', 'plain', 'superseded'].forEach(function (pass) {
      var colour = pass === 'superseded' ? SUPERSEDED
        : pass === 'quiet' ? 'rgba(120,130,140,0.16)' : 'rgba(120,130,140,0.55)';
      ctx.setLineDash(pass === 'superseded' ? [6 / scale, 4 / scale] : []);
      ctx.strokeStyle = colour;
      ctx.beginPath();
      var heads = [];
      self.edges.forEach(function (l) {
        var kind = l.superseded ? 'superseded' : l.quiet ? 'quiet' : 'plain';
        if (kind !== pass) return;
        if (l.superseded) superseded++;
        var c = self.controlPoint(l);
        ctx.moveTo(l.s.x, l.s.y);
        if (l.bend) ctx.quadraticCurveTo(c[0], c[1], l.t.x, l.t.y);
        else ctx.lineTo(l.t.x, l.t.y);
        heads.push([l, c]);
      });
      ctx.stroke();
      ctx.beginPath();
      heads.forEach(function (h) { self.arrow(h[0], h[1]); });
      ctx.fillStyle = colour;
      ctx.fill();
    });
    ctx.setLineDash([]);
    var room = new LabelRoom(this.width, this.height);
    var nodeLabels = this.placeNodeLabels(room);
    if (showEdgeLabels) {
      ctx.font = (10 / scale) + 'px sans-serif';
      ctx.textAlign = 'center';
      this.edges.forEach(function (l) {
        var text = l.data.label || '';
        if (!text || (l.quiet && !l.superseded)) return; // a quiet node's facts stay unlabelled
        var c = self.controlPoint(l);
        var x = (l.s.x + 2 * c[0] + l.t.x) / 4, y = (l.s.y + 2 * c[1] + l.t.y) / 4;
        var w = self.textWidth(text, 10);
        var sx = x * scale + self.tx, sy = y * scale + self.ty - 3;
        if (!room.take(sx - w / 2, sy - 9, w, 11)) return;
        ctx.fillStyle = l.superseded ? SUPERSEDED : '#56606a';
        ctx.fillText(text, x, y - 3 / scale);
      });
    }
    var byColour = new Map();
    this.nodes.forEach(function (p) {
      var colour = p.quiet ? QUIET : p.color;
      var list = byColour.get(colour);
      if (!list) byColour.set(colour, list = []);
      list.push(p);
    });
    byColour.forEach(function (list, colour) {
      ctx.beginPath();
      list.forEach(function (p) {
        var r = self.radius(p);
        ctx.moveTo(p.x + r, p.y);
        ctx.arc(p.x, p.y, r, 0, TWO_PI);
      });
      ctx.fillStyle = colour;
      ctx.fill();
    });
    this.nodes.forEach(function (p) {
      if (!self.highlighted.has(p.id) && self.selected !== p.id) return;
      ctx.beginPath();
      ctx.arc(p.x, p.y, self.radius(p), 0, TWO_PI);
      ctx.lineWidth = 3 / scale;
      ctx.strokeStyle = self.selected === p.id ? '#111' : '#f5b700';
      ctx.stroke();
    });
    ctx.font = (12 / scale) + 'px sans-serif';
    ctx.textAlign = 'left';
    ctx.fillStyle = '#1d2329';
    ctx.strokeStyle = 'rgba(255,255,255,0.85)';
    ctx.lineWidth = 3 / scale;
    ctx.lineJoin = 'round';
    nodeLabels.forEach(function (p) {
      // The label's box was placed in screen space: draw its text there.
      var x = (p.labelAt[0] - self.tx) / scale, y = (p.labelAt[1] - self.ty) / scale;
      ctx.fillStyle = p.quiet ? '#7a838c' : '#1d2329';
      ctx.strokeText(p.name, x, y); // a halo: readable over edges
      ctx.fillText(p.name, x, y);
    });
    var ds = this.canvas.dataset;
    this.shownLabels = new Set(nodeLabels.map(function (p) { return p.id; }));
    ds.labels = String(nodeLabels.length);
    ds.labelBoxes = JSON.stringify(room.nodeBoxes);
    ds.nodes = String(this.nodes.length);
    ds.edges = String(this.edges.length);
    ds.superseded = String(superseded);
    ds.quiet = String(this.quietCount || 0);
    if (this.nodes.length && !firstFrameMarked && global.performance && performance.mark) {
      firstFrameMarked = true;
      performance.mark('lcg-first-frame');
    }
  };

  /* Which node labels this frame draws: candidates in priority order, each kept only where it
   * overlaps no label placed before it (screen space). Off-screen nodes are skipped. */
  GraphView.prototype.placeNodeLabels = function (room) {
    var self = this, scale = this.scale, placed = [], seen = new Set();
    var forced = [];
    if (this.selected) forced.push(this.byId.get(this.selected));
    if (this.hover) forced.push(this.byId.get(this.hover));
    this.highlighted.forEach(function (id) { forced.push(self.byId.get(id)); });
    var zoomed = scale > 1.2;
    function consider(p) {
      if (!p || seen.has(p.id)) return;
      seen.add(p.id);
      var w = self.textWidth(p.name, 12);
      var cx = p.x * scale + self.tx, cy = p.y * scale + self.ty, r = self.radius(p) * scale;
      if (cx - r - w > self.width || cx + r + w < 0 || cy + r + 16 < 0 || cy - r - 16 > self.height) return;
      // Right of the node, else left, above, below: the first place free of other labels.
      var spots = [[cx + r + 2, cy + 4], [cx - r - 2 - w, cy + 4], [cx - w / 2, cy - r - 3], [cx - w / 2, cy + r + 12]];
      for (var i = 0; i < spots.length; i++) {
        var sx = spots[i][0], sy = spots[i][1];
        if (sx < 0 || sx + w > self.width || sy - 11 < 0 || sy + 3 > self.height) continue;
        if (room.take(sx, sy - 11, w, 14, true)) { p.labelAt = [sx, sy]; placed.push(p); return; }
      }
    }
    forced.forEach(consider);
    this.ranked.forEach(function (p) { if ((zoomed && !p.literal) || self.labelled.has(p.id)) consider(p); });
    return placed;
  };

  /* Width in CSS px of `text` at `px` sans-serif (cached: measuring is the costly part). */
  GraphView.prototype.textWidth = function (text, px) {
    var key = px + '|' + text, w = this.labelWidths.get(key);
    if (w === undefined) {
      var ctx = this.ctx;
      ctx.save();
      ctx.setTransform(1, 0, 0, 1, 0, 0);
      ctx.font = px + 'px sans-serif';
      w = ctx.measureText(text).width;
      ctx.restore();
      this.labelWidths.set(key, w);
    }
    return w;
  };

  /* The screen's free room for labels: a coarse occupancy grid of LABEL_CELL px cells. */
  function LabelRoom(width, height) {
    this.cols = Math.ceil(width / LABEL_CELL) + 1;
    this.rows = Math.ceil(height / LABEL_CELL) + 1;
    this.used = new Uint8Array(this.cols * this.rows);
    this.nodeBoxes = [];
  }

  /* Claims the box (x, y, w, h) if none of it is taken; returns whether it was. */
  LabelRoom.prototype.take = function (x, y, w, h, isNode) {
    var c0 = Math.max(0, Math.floor(x / LABEL_CELL)), c1 = Math.min(this.cols - 1, Math.floor((x + w) / LABEL_CELL));
    var r0 = Math.max(0, Math.floor(y / LABEL_CELL)), r1 = Math.min(this.rows - 1, Math.floor((y + h) / LABEL_CELL));
    var r, c;
    for (r = r0; r <= r1; r++) {
      for (c = c0; c <= c1; c++) if (this.used[r * this.cols + c]) return false;
    }
    for (r = r0; r <= r1; r++) {
      for (c = c0; c <= c1; c++) this.used[r * this.cols + c] = 1;
    }
    if (isNode) this.nodeBoxes.push([Math.round(x), Math.round(y), Math.round(w), Math.round(h)]);
    return true;
  };

  /* Adds the arrowhead of edge `l` (curve control point `c`) to the current path. */
  GraphView.prototype.arrow = function (l, c) {
    if (l.s === l.t) return;
    var ctx = this.ctx, r = this.radius(l.t);
    var dx = l.t.x - c[0], dy = l.t.y - c[1], d = Math.sqrt(dx * dx + dy * dy) || 1;
    var ux = dx / d, uy = dy / d, size = 6 / Math.max(this.scale, 0.5);
    var x = l.t.x - ux * r, y = l.t.y - uy * r;
    ctx.moveTo(x, y);
    ctx.lineTo(x - ux * size - uy * size * 0.5, y - uy * size + ux * size * 0.5);
    ctx.lineTo(x - ux * size + uy * size * 0.5, y - uy * size - ux * size * 0.5);
    ctx.closePath();
  };

  // -- interaction ---------------------------------------------------------------------------

  GraphView.prototype.toWorld = function (ev) {
    var rect = this.canvas.getBoundingClientRect();
    return [(ev.clientX - rect.left - this.tx) / this.scale, (ev.clientY - rect.top - this.ty) / this.scale];
  };

  GraphView.prototype.nodeAt = function (x, y) {
    var best = null, bestD = Infinity, slack = 3 / this.scale;
    for (var i = 0; i < this.nodes.length; i++) {
      var p = this.nodes[i], dx = p.x - x, dy = p.y - y, d = dx * dx + dy * dy;
      var r = this.radius(p) + slack;
      if (d <= r * r && d < bestD) { best = p; bestD = d; }
    }
    return best;
  };

  GraphView.prototype.edgeAt = function (x, y) {
    var best = null, bestD = 5 / this.scale;
    for (var i = 0; i < this.edges.length; i++) {
      var l = this.edges[i], c = this.controlPoint(l);
      for (var k = 0; k <= 10; k++) {
        var t = k / 10, u = 1 - t;
        var px = u * u * l.s.x + 2 * u * t * c[0] + t * t * l.t.x;
        var py = u * u * l.s.y + 2 * u * t * c[1] + t * t * l.t.y;
        var d = Math.sqrt((px - x) * (px - x) + (py - y) * (py - y));
        if (d < bestD) { best = l; bestD = d; }
      }
    }
    return best;
  };

  GraphView.prototype.showTooltip = function (ev, hit) {
    var tip = this.tooltip;
    if (!tip) return;
    if (!hit) { tip.hidden = true; return; }
    tip.textContent = '';
    function line(text, cls) {
      var div = document.createElement('div');
      div.textContent = text;
      if (cls) div.className = cls;
      tip.appendChild(div);
    }
    if (hit.kind === 'node') {
      line(hit.item.name, 'tip-title');
      line((hit.item.type || 'Entity') + (hit.item.group ? ' · group ' + hit.item.group : ''));
      var code = hit.item.data && hit.item.data.code;
      if (code && code.location) line(code.location + (code.removed ? ' (removed)' : ''));
    } else {
      var e = hit.item.data;
      line(hit.item.s.name + ' → ' + (e.label || '') + ' → ' + hit.item.t.name, 'tip-title');
      if (e.fact) line(e.fact);
      line(validityText(e), e.superseded ? 'tip-superseded' : '');
      if (e.superseded) line(e.status === 'retracted' ? 'retracted' : 'superseded', 'tip-superseded');
    }
    var rect = this.canvas.getBoundingClientRect();
    tip.hidden = false;
    tip.style.left = (ev.clientX - rect.left + 14) + 'px';
    tip.style.top = (ev.clientY - rect.top + 14) + 'px';
  };

  GraphView.prototype.bindEvents = function () {
    var self = this, canvas = this.canvas, drag = null, moved = false;
    canvas.addEventListener('mousedown', function (ev) {
      var w = self.toWorld(ev), node = self.nodeAt(w[0], w[1]);
      drag = { node: node, x: ev.clientX, y: ev.clientY, tx: self.tx, ty: self.ty };
      moved = false;
      if (node) node.fixed = true;
    });
    global.addEventListener('mousemove', function (ev) {
      if (drag) {
        if (Math.abs(ev.clientX - drag.x) + Math.abs(ev.clientY - drag.y) > 3) moved = true;
        if (!moved) return;
        self.autoFit = false;
        if (drag.node) {
          var w = self.toWorld(ev);
          drag.node.x = w[0]; drag.node.y = w[1];
          self.reheat(0.15);
        } else {
          self.tx = drag.tx + ev.clientX - drag.x;
          self.ty = drag.ty + ev.clientY - drag.y;
        }
        self.requestFrame();
        return;
      }
      if (ev.target !== canvas) return;
      var p = self.toWorld(ev), node = self.nodeAt(p[0], p[1]);
      var hovered = node ? node.id : null;
      if (hovered !== self.hover) { self.hover = hovered; self.requestFrame(); }
      var hit = node ? { kind: 'node', item: node } : null;
      if (!hit) { var edge = self.edgeAt(p[0], p[1]); if (edge) hit = { kind: 'edge', item: edge }; }
      canvas.style.cursor = hit ? 'pointer' : 'default';
      self.showTooltip(ev, hit);
    });
    global.addEventListener('mouseup', function () {
      if (drag && drag.node) drag.node.fixed = false;
      if (drag && !moved) {
        var node = drag.node;
        self.selected = node ? node.id : null;
        self.emit('select', node ? node.data : null);
        self.requestFrame();
      }
      drag = null;
    });
    canvas.addEventListener('mouseleave', function () {
      if (self.tooltip) self.tooltip.hidden = true;
      if (self.hover) { self.hover = null; self.requestFrame(); }
    });
    canvas.addEventListener('dblclick', function (ev) {
      var w = self.toWorld(ev), node = self.nodeAt(w[0], w[1]);
      if (node) self.emit('expand', node.data);
    });
    canvas.addEventListener('wheel', function (ev) {
      ev.preventDefault();
      self.autoFit = false;
      var rect = canvas.getBoundingClientRect();
      var mx = ev.clientX - rect.left, my = ev.clientY - rect.top;
      var factor = Math.exp(-ev.deltaY * 0.0015);
      var next = Math.min(8, Math.max(0.05, self.scale * factor));
      self.tx = mx - (mx - self.tx) * next / self.scale;
      self.ty = my - (my - self.ty) * next / self.scale;
      self.scale = next;
      self.requestFrame();
    }, { passive: false });
  };

  GraphView.prototype.select = function (id) {
    this.selected = id;
    this.requestFrame();
  };

  GraphView.prototype.highlight = function (ids) {
    this.highlighted = new Set(ids);
    this.requestFrame();
  };

  GraphView.prototype.refit = function () {
    this.autoFit = true;
    this.requestFrame();
  };

  GraphView.prototype.types = function () {
    var counts = new Map();
    this.nodes.forEach(function (n) {
      var t = n.type || 'Entity';
      counts.set(t, (counts.get(t) || 0) + 1);
    });
    return Array.from(counts.entries()).sort(function (a, b) { return b[1] - a[1]; })
      .map(function (e) { return { type: e[0], count: e[1], color: colorFor(e[0]) }; });
  };

  global.LcgGraph = {
    GraphView: GraphView,
    colorFor: colorFor,
    isLiteral: isLiteral,
    formatTime: formatTime,
    validityText: validityText
  };
})(window);
