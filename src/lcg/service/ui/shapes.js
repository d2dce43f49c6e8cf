/* lcg UI: every read of an API result's fields lives here, so a changed result shape is a
 * change to this file only. Produces the normalised node/edge objects graph.js draws and the
 * plain objects the views render. Timestamps on the wire are 'YYYY-MM-DD HH:MM:SS' (UTC) or
 * RFC 3339; inside the UI they are epoch milliseconds.
 */
(function (global) {
  'use strict';

  function parseTime(text) {
    if (text == null || text === '') return null;
    var s = String(text).trim();
    if (/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}/.test(s)) s = s.replace(' ', 'T') + 'Z';
    else if (/^\d{4}-\d{2}-\d{2}$/.test(s)) s += 'T00:00:00Z';
    var ms = Date.parse(s);
    return isNaN(ms) ? null : ms;
  }

  function isoTime(ms) {
    return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
  }

  function entityType(labels) {
    var specific = (labels || []).filter(function (l) { return l !== 'Entity'; });
    return specific.length ? specific[specific.length - 1] : 'Entity';
  }

  /* An entity record (docs/api.md §records) -> graph node. */
  function node(entity) {
    var labels = entity.labels || [];
    var attributes = parseAttributes(entity.attributes);
    return {
      id: entity.uuid,
      name: entity.name,
      type: entityType(labels),
      group: entity.group_id,
      labels: labels,
      summary: entity.summary || '',
      createdAt: parseTime(entity.created_at),
      attributes: attributes,
      episodes: entity.episode_uuids || [],
      code: code(entity.name, labels, attributes)
    };
  }

  /* A code entity (label `Code`, docs/code-graph.md) -> {kind, location, ...}; null otherwise.
   * `location` is `path:line_start-line_end` for a symbol, the path for a file. */
  var CODE_KINDS = ['File', 'Module', 'Class', 'Function', 'Method'];
  function code(name, labels, a) {
    if (labels.indexOf('Code') < 0) return null;
    var kind = CODE_KINDS.filter(function (k) { return labels.indexOf(k) >= 0; })[0] || entityType(labels);
    var path = a.path != null ? String(a.path) : '';
    var location = path && a.line_start != null ? path + ':' + a.line_start + '-' + a.line_end : path;
    return {
      kind: kind,
      path: path,
      location: location,
      signature: a.signature ? String(a.signature) : '',
      doc: a.doc ? String(a.doc) : '',
      language: a.language ? String(a.language) : '',
      lines: a.lines != null ? Number(a.lines) : null,
      removed: a.removed === true || a.removed === 'true',
      renamedTo: a.renamed_to ? String(a.renamed_to) : '',
      // An overloaded name's signatures (docs/code-graph.md); a list, or its JSON text.
      variants: listOf(a.variants),
      external: a.external === true || a.external === 'true'
    };
  }

  /* A code history episode (`git:<sha>` source) -> {sha, subject}; null for any other. */
  function commitOf(episode) {
    var src = String(episode.source || '');
    if (src.indexOf('git:') !== 0) return null;
    var content = String(episode.content || '');
    var colon = content.indexOf(': ');
    return { sha: src.slice(4), subject: colon >= 0 ? content.slice(colon + 2) : content };
  }

  function listOf(value) {
    if (Array.isArray(value)) return value.map(String);
    if (typeof value !== 'string' || value.charAt(0) !== '[') return [];
    try { var list = JSON.parse(value); return Array.isArray(list) ? list.map(String) : []; } catch (err) { return []; }
  }

  function parseAttributes(text) {
    if (!text) return {};
    if (typeof text === 'object') return text;
    try { return JSON.parse(text); } catch (err) { return {}; }
  }

  /* An edge/fact record -> graph edge. `at` is the instant the view shows (ms; null = now):
   * a fact whose validity ended (or that the graph retired) by then is drawn as superseded. */
  function edge(fact, at) {
    var ref = at == null ? Date.now() : at;
    var validTo = parseTime(fact.invalid_at);
    var expired = parseTime(fact.expired_at);
    var status = fact.status || null;
    // The timeline's own `status` (computed for now) wins; otherwise judge at the view's instant.
    var superseded = status ? status !== 'current'
      : (validTo != null && validTo <= ref) || (expired != null && expired <= ref);
    return {
      id: fact.uuid,
      source: fact.source_node_uuid,
      target: fact.target_node_uuid,
      label: fact.name,
      fact: fact.fact,
      group: fact.group_id,
      relationType: fact.relation_type || null,
      validFrom: parseTime(fact.valid_at),
      validTo: validTo,
      learnedAt: parseTime(fact.created_at),
      retiredAt: expired,
      superseded: superseded,
      status: status || (superseded ? 'superseded' : 'current'),
      supersedes: fact.supersedes || [],
      supersededBy: fact.superseded_by || [],
      direction: fact.direction || null
    };
  }

  /* Time parameters of a fact read for the view's instant. For now (null): every fact the
   * graph holds, superseded ones included as history, withdrawn ones not (docs/temporal.md). */
  function timeParams(at, axis) {
    if (at == null) return { known_at: isoTime(Date.now() + 1000), include_invalidated: true };
    return axis === 'known' ? { known_at: isoTime(at) } : { as_of: isoTime(at) };
  }

  // -- results ---------------------------------------------------------------------------------

  function graphResult(nodesResult, edgesResult, at) {
    return {
      nodes: (nodesResult.nodes || []).map(node),
      edges: (edgesResult.edges || edgesResult.facts || []).map(function (f) { return edge(f, at); })
    };
  }

  function neighbours(result, at) {
    return {
      center: result.center_uuid,
      nodes: (result.nodes || []).map(node),
      edges: (result.edges || []).map(function (f) { return edge(f, at); })
    };
  }

  function search(entities, facts, passages) {
    return {
      entities: (entities.nodes || []).map(node),
      facts: (facts.facts || []).map(function (f) { return edge(f, null); }),
      passages: (passages.passages || []).map(function (p) {
        return { id: p.uuid, name: p.name, content: p.content, score: p.score,
                 source: p.source_description, validAt: parseTime(p.valid_at) };
      })
    };
  }

  function episodes(result) {
    return (result.episodes || []).map(function (e) {
      return { id: e.uuid, name: e.name, content: e.content, source: e.source_description,
               validAt: parseTime(e.valid_at), createdAt: parseTime(e.created_at),
               mentions: e.entity_edges || [], group: e.group_id };
    });
  }

  /* knowledge_get_entity_timeline -> {entity, facts} with supersession links by uuid. */
  function timeline(result) {
    return {
      entity: node(result.entity),
      facts: (result.facts || []).map(function (f) { return edge(f, null); })
    };
  }

  /* knowledge_get_changes -> [{kind, at, edge}] in time order. */
  function changes(result) {
    return {
      since: parseTime(result.since),
      until: parseTime(result.until),
      truncated: !!result.truncated,
      entries: (result.changes || []).map(function (c) {
        return { kind: c.kind, at: parseTime(c.at), edge: edge(c.fact, null) };
      })
    };
  }

  /* knowledge_status -> what the status page shows. */
  function status(s) {
    var groups = s.wal_groups || {};
    var providers = [];
    if (s.embedding_model != null) {
      providers.push({
        role: 'embedder', name: s.embedding_model + (s.embedding_dim ? ' (' + s.embedding_dim + ' dims)' : ''),
        fallback: !!s.embedding_lexical_only,
        note: s.embedding_lexical_only ? 'offline fallback: lexical only (hash embedder)' : ''
      });
    }
    // `extractor`: {kind: 'llm'|'heuristic', configured, provider, model, source, error, ...}
    var ex = s.extractor;
    if (ex && typeof ex === 'object') {
      var heuristic = ex.kind === 'heuristic';
      var replay = /cassette|replay/i.test(String(ex.source || '') + String(ex.provider || ''));
      providers.push({
        role: 'extractor',
        name: heuristic ? 'heuristic extractor' + (ex.version ? ' ' + ex.version : '')
          : ex.configured ? [ex.provider, ex.model].filter(Boolean).join(' · ') || 'LLM'
          : 'LLM extractor: not configured',
        fallback: heuristic || replay || ex.configured === false,
        note: heuristic ? 'offline fallback: rule-based, no LLM'
          : replay ? 'offline: replaying recorded answers'
          : ex.configured === false ? (ex.error || 'not configured')
          : (ex.source ? 'from ' + ex.source : '') + (ex.endpoint ? ' · ' + ex.endpoint : '')
      });
    }
    return {
      degraded: !!s.degraded,
      reason: s.reason || null,
      counts: [
        ['entities', s.entity_count], ['facts', s.relationship_count], ['episodes', s.episode_count]
      ],
      // Two wire formats (DB read format and ISO-Z, docs/api.md §parameters): both become epoch ms
      // here.
      lastIndexed: parseTime(s.last_index_time),
      firstIndexed: parseTime(s.index_created_at),
      databasePath: s.database_path || '',
      groups: Object.keys(groups).sort().map(function (g) {
        var w = groups[g];
        return { group: g, applied: w.applied_seq, max: w.max_seq, generation: w.generation,
                 generationStatus: w.generation_status, hydration: w.hydration_status };
      }),
      providers: providers,
      indicesBuilt: s.indices_built,
      raw: s
    };
  }

  global.LcgShapes = {
    parseTime: parseTime, isoTime: isoTime, node: node, edge: edge, timeParams: timeParams,
    graphResult: graphResult, neighbours: neighbours, search: search, episodes: episodes,
    timeline: timeline, changes: changes, status: status, code: code, commitOf: commitOf
  };
})(window);
