const CFG = JSON.parse(document.getElementById('cfg').textContent);
const $ = (id) => document.getElementById(id);
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v; else if (k === 'onclick') e.onclick = v; else e.setAttribute(k, v);
  }
  for (const k of kids.flat()) { if (k !== null && k !== undefined) e.append(k instanceof Node ? k : String(k)); }
  return e;
}
function clock(ms) { return ms ? new Date(ms).toISOString().substring(11, 19) + ' UTC' : ''; }
function span(s) {
  if (s === null || s === undefined) return '';
  s = Math.round(s); if (s < 60) return s + ' s';
  if (s < 3600) return Math.floor(s / 60) + ' min ' + (s % 60) + ' s';
  return Math.floor(s / 3600) + ' h ' + Math.floor(s % 3600 / 60) + ' min';
}
function bytes(n) {
  if (n === null || n === undefined) return '';
  const u = ['B', 'KB', 'MB', 'GB', 'TB']; let i = 0;
  while (n >= 1000 && i < u.length - 1) { n /= 1000; i++; }
  return (i ? n.toFixed(1) : n) + ' ' + u[i];
}
function badge(status) { return el('span', {class: 'badge b-' + status}, status); }
function runLink(url, text) {
  // Airflow's UI runs around this iframe: move its router (same origin) instead of loading the UI in the frame.
  return el('a', {href: url, target: '_top', onclick: (ev) => {
    try {
      const top = window.top;
      if (top !== window && top.location.origin === window.location.origin) {
        ev.preventDefault();
        // a history entry shaped like the router's own ({usr, key, idx}), so Back returns to this page
        const idx = (top.history.state && typeof top.history.state.idx === 'number') ? top.history.state.idx : 0;
        top.history.pushState({usr: null, key: Math.random().toString(36).slice(2, 10), idx: idx + 1}, '', url);
        top.dispatchEvent(new PopStateEvent('popstate', {state: top.history.state}));
      }
    } catch (e) { /* not same-origin: the plain link */ }
  }}, text);
}
function table(head, rows) {
  return el('table', {}, el('tr', {}, head.map((h) => el('th', {}, h))),
    rows.map((r) => el('tr', {}, r.map((c) => c instanceof Node ? el('td', {}, c) : el('td', {}, c)))));
}
function lockCell(lock) {
  if (!lock) return el('span', {class: 'muted'}, 'free');
  const who = lock.url ? runLink(lock.url, lock.holder) : lock.holder;
  return el('span', {}, who, ' ', el('span', {class: 'muted'}, '(' + lock.operation + ', ' + span(lock.held_s) + ')'));
}
function windowCell(w) {
  if (!w) return el('span', {class: 'muted'}, '');
  return el('span', {class: w.state === 'closed' ? 's-warn' : '', title: w.message}, w.state === 'none' ? 'no window' : w.state);
}
function progressText(op) {
  if (!op) return '';
  const parts = [];
  const a = op.active;
  if (a) {
    parts.push(a.roll_id + ': ' + a.done + '/' + a.total + ' ' + a.node + 's done');
    if (a.current) parts.push('now ' + a.current + ' (' + Object.values(a.current_phases).join(', ') + ')');
    else if (a.next) parts.push('next ' + a.next);
    if (a.eta_s !== null) parts.push('about ' + span(a.eta_s) + ' left, done near ' + clock(a.ends_ms));
  }
  if (op.waves) parts.push('waves ' + op.waves.done + '/' + op.waves.total + (op.waves.running ? ', wave ' + op.waves.running + ' running' : ''));
  if (op.reassigning) parts.push(op.reassigning + ' partitions moving');
  return parts.join('; ');
}
function lagCell(lag) {
  const cls = lag.status === 'OK' ? 's-ok' : (lag.status === 'WARN' ? 's-warn' : (lag.groups.length ? 's-bad' : 'muted'));
  return el('span', {class: cls, title: lag.groups.map((g) => g.group + ': ' + g.status).join(', ')}, lag.status);
}
function count(n) { return n === null || n === undefined ? '' : el('span', {class: n ? 's-bad' : ''}, n); }
function fleet(data) {
  const rows = data.clusters.map((c) => [
    el('a', {href: c.page_url}, c.cluster), badge(c.status), c.mode || '',
    c.brokers_total === null ? '' : el('span', {class: c.brokers_down.length ? 's-bad' : ''}, c.brokers_up + ' / ' + c.brokers_total),
    c.controller && c.controller.id !== null ? c.controller.kind + ' ' + c.controller.id : '',
    count(c.offline), count(c.urp), count(c.under_min_isr),
    c.leader_imbalance.worst_pct === null ? '' : el('span', {class: c.leader_imbalance.brokers_over.length ? 's-warn' : ''}, c.leader_imbalance.worst_pct + '%'),
    lagCell(c.lag), lockCell(c.lock), windowCell(c.window), progressText(c.operation),
    el('span', {class: 'muted'}, c.reasons.join('; ')),
  ]);
  $('main').replaceChildren(data.clusters.length ? table(['cluster', 'status', 'mode', 'brokers up', 'controller',
    'offline', 'URP', 'under min ISR', 'leader imbalance', 'lag', 'lock', 'window', 'operation', 'why'], rows)
    : el('p', {class: 'muted'}, 'No connection of conn type kafka that you may read.'));
}
function partitions(title, part) {
  if (!part) return [];
  const rows = part.listed.map((p) => [p.name, p.leader, '[' + p.replicas.join(', ') + ']', '[' + p.isr.join(', ') + ']',
    '[' + p.missing.join(', ') + ']', p.min_isr]);
  return [el('h2', {}, title + ' (' + part.count + ')'), part.count ? table(['partition', 'leader', 'replicas', 'isr',
    'missing', 'min ISR'], rows) : el('p', {class: 'muted'}, 'none'),
    part.count > part.listed.length ? el('p', {class: 'muted'}, 'first ' + part.listed.length + ' listed') : null];
}
function cluster(data) {
  const s = data.summary, op = data.operation;
  const out = [el('p', {}, badge(s.status), ' ', s.mode ? s.mode + ' mode' : '', ' · ',
    s.brokers_total === null ? s.error : s.brokers_up + ' of ' + s.brokers_total + ' brokers up', ' · ',
    s.reasons.length ? s.reasons.join('; ') : 'healthy')];
  out.push(el('h2', {}, 'Operation'));
  if (!op) out.push(el('p', {class: 'muted'}, 'none running (the lock is free)'));
  else {
    out.push(el('p', {}, 'lock held by ', lockCell(s.lock), ' · window: ', windowCell(s.window), ' ',
      s.window ? el('span', {class: 'muted'}, s.window.message) : ''));
    out.push(table(['roll', 'done / total', '', 'now', 'next', 'ETA'], op.rolls.map((r) => [r.roll_id,
      r.done + ' / ' + r.total + ' ' + r.node + 's', el('span', {class: 'bar'}, el('span', {style: 'width:' + (r.total ? 100 * r.done / r.total : 0) + '%'})),
      r.current ? r.current + ' (' + Object.values(r.current_phases).join(', ') + ')' : '', r.next || '',
      r.finished ? 'done' : (r.eta_s === null ? 'after the first batch' : span(r.eta_s) + ', near ' + clock(r.ends_ms))])));
    if (op.waves || op.reassigning) out.push(el('p', {}, progressText({waves: op.waves, reassigning: op.reassigning})));
  }
  out.push(el('h2', {}, 'Brokers'));
  out.push(table(['id', 'host', 'rack', 'state', 'Kafka', 'leaders', 'replicas', 'preferred', 'on disk', 'IBP / metadata.version'],
    data.brokers.map((b) => [b.id + (b.controller ? ' (controller)' : '') + (b.voter ? ' (quorum voter too)' : ''), b.host ? b.host + ':' + b.port : '', b.rack || '',
      el('span', {class: b.up ? 's-ok' : 's-bad'}, b.up ? 'up' : 'DOWN'), b.kafka_version || '', b.leaders, b.replicas, b.preferred, bytes(b.disk_bytes),
      b.ibp || (b.metadata_version ? b.metadata_version.name : '')])));
  if (data.controllers.length) {
    out.push(el('h2', {}, 'KRaft controllers'));
    out.push(table(['controller', 'role', 'caught up', 'log end offset', 'lag (records)'], data.controllers.map((c) => [c.id,
      c.observer ? 'observer (not a voter)' : (c.leader ? 'leader' : 'follower') + (c.combined ? ' · combined with broker ' + c.id : ''), el('span', {class: c.caught_up ? 's-ok' : 's-bad'}, c.caught_up ? 'yes' : 'no'),
      c.log_end_offset, c.lag_offsets === null ? '' : c.lag_offsets])));
  }
  out.push(...partitions('Offline partitions', data.partitions.offline));
  out.push(...partitions('Under-replicated partitions', data.partitions.under_replicated));
  out.push(...partitions('Under min ISR', data.partitions.under_min_isr));
  out.push(el('h2', {}, 'Consumer groups (Burrow)'));
  out.push(data.groups.length ? table(['group', 'status', 'total lag', 'partitions in trouble'], data.groups.map((g) =>
    [g.group, lagCell({status: g.status, groups: [g]}), g.total_lag === null ? '' : g.total_lag, g.partitions.join(', ')]))
    : el('p', {class: 'muted'}, s.lag.status));
  out.push(el('h2', {}, 'Last operations'));
  out.push(data.past_runs.length ? table(['run', 'state', 'started', 'ended', 'outcome'], data.past_runs.map((r) =>
    [runLink(r.url, r.dag_id + ' / ' + r.run_id), r.state, clock(r.start_ms), clock(r.end_ms), r.outcome]))
    : el('p', {class: 'muted'}, 'none found'));
  const errs = Object.entries(s.part_errors);
  if (errs.length) out.push(el('h2', {}, 'Not read'), table(['part', 'error'], errs));
  $('main').replaceChildren(...out.filter((x) => x !== null && x !== undefined));
}
async function refresh() {
  try {
    const resp = await fetch(CFG.api, {credentials: 'same-origin', headers: {Accept: 'application/json'}});
    if (resp.status === 401 || resp.status === 403) { $('footer').textContent = 'Not logged in to Airflow, or not allowed (HTTP ' + resp.status + ').'; return; }
    if (!resp.ok) throw new Error('HTTP ' + resp.status);
    const data = await resp.json();
    (CFG.kind === 'fleet' ? fleet : cluster)(data);
    $('footer').textContent = 'updated ' + clock(data.now_ms) + ' · refreshes every ' + CFG.refresh_s + ' s';
  } catch (e) {
    $('footer').textContent = 'refresh failed: ' + e.message + ' (retrying)';
  }
  setTimeout(refresh, CFG.refresh_s * 1000);
}
refresh();
