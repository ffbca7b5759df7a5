/**
 * The inbox's static assets, served from memory at /assets/*. Pages load them from 'self' only:
 * the Content-Security-Policy forbids inline scripts, so markup that slipped through escaping
 * still could not run.
 */

export const STYLESHEET = `
:root { --fg:#1d232b; --muted:#5b6673; --line:#d9dee4; --bg:#f6f7f9; --card:#fff; --primary:#1f5fbf; --danger:#b3261e; --ok:#2e7d32; }
* { box-sizing: border-box; }
body { margin:0; font:15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color:var(--fg); background:var(--bg); }
header.top { display:flex; align-items:center; gap:16px; padding:10px 20px; background:#14202e; color:#fff; }
header.top a { color:#fff; text-decoration:none; font-weight:600; }
header.top .who { margin-left:auto; font-size:13px; opacity:.9; }
header.top form { display:inline; }
header.top button { background:transparent; color:#fff; border:1px solid #fff6; border-radius:4px; padding:3px 8px; cursor:pointer; }
main { max-width:1100px; margin:0 auto; padding:16px 20px 60px; }
h1 { font-size:22px; margin:8px 0 12px; }
h2 { font-size:17px; margin:0 0 6px; }
.banner { padding:10px 14px; border-radius:6px; margin:10px 0; border:1px solid var(--line); background:#fff; }
.banner.ok { border-color:#a5d6a7; background:#eef8ef; }
.banner.error { border-color:#ef9a9a; background:#fdeeee; }
form.filters { display:flex; flex-wrap:wrap; gap:10px; align-items:flex-end; background:#fff; border:1px solid var(--line); border-radius:6px; padding:10px 12px; }
form.filters label { display:flex; flex-direction:column; font-size:12px; color:var(--muted); }
input, select, textarea { font:inherit; padding:5px 7px; border:1px solid #b8c0ca; border-radius:4px; background:#fff; }
textarea { width:100%; min-height:54px; }
button.btn { font:inherit; padding:6px 14px; border-radius:4px; border:1px solid #9aa5b1; background:#fff; cursor:pointer; }
button.btn.primary { background:var(--primary); border-color:var(--primary); color:#fff; }
button.btn.danger { background:var(--danger); border-color:var(--danger); color:#fff; }
.live { font-size:12px; padding:2px 8px; border-radius:10px; background:#e3e7ec; color:var(--muted); }
.live[data-state="live"] { background:#e2f3e4; color:var(--ok); }
#items { list-style:none; padding:0; margin:14px 0; display:flex; flex-direction:column; gap:12px; }
article.item { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:12px 16px; }
article.item[data-status="closed"], article.item[data-status="answered"] { opacity:.7; }
.badges { display:flex; flex-wrap:wrap; gap:6px; margin:4px 0 8px; }
.badge { font-size:12px; padding:1px 8px; border-radius:10px; background:#eef1f5; color:#2c3a4a; }
.badge.urgent, .badge.high { background:#fde7e6; color:var(--danger); }
dl.facts { display:grid; grid-template-columns:150px 1fr; gap:4px 12px; margin:6px 0 10px; }
dl.facts dt { color:var(--muted); }
dl.facts dd { margin:0; overflow-wrap:anywhere; }
pre { background:#f1f3f6; padding:8px 10px; border-radius:4px; overflow:auto; margin:0; font-size:13px; white-space:pre-wrap; overflow-wrap:anywhere; }
form.answer { border-top:1px dashed var(--line); padding-top:10px; display:flex; flex-direction:column; gap:8px; }
form.answer .field { display:flex; flex-direction:column; gap:3px; font-size:13px; }
form.answer .actions { display:flex; gap:8px; }
table.timeline { width:100%; border-collapse:collapse; background:#fff; border:1px solid var(--line); }
table.timeline th, table.timeline td { text-align:left; padding:6px 8px; border-bottom:1px solid var(--line); vertical-align:top; font-size:13px; }
table.timeline th { background:#eef1f5; }
.muted { color:var(--muted); }
.login { max-width:420px; margin:60px auto; background:#fff; border:1px solid var(--line); border-radius:8px; padding:20px; }
.login input { width:100%; }
`;

export const INBOX_SCRIPT = `'use strict';
// Live inbox: listen to /v1/events/stream (server-sent events) and, on each inbox change, fetch
// the ids the current filters select and reconcile the list: items that left are removed, new
// ones are fetched as server-rendered (escaped) fragments. Items being answered are left alone.
(function () {
  var list = document.getElementById('items');
  var live = document.getElementById('live-status');
  if (!list || !window.EventSource) return;
  var query = list.getAttribute('data-query') || '';
  var timer = null;
  var running = false;
  var again = false;
  var source = new EventSource('/v1/events/stream');
  function setLive(state, text) { if (live) { live.setAttribute('data-state', state); live.textContent = text; } }
  source.addEventListener('ready', function () { setLive('live', 'live'); });
  source.addEventListener('inbox', function () { clearTimeout(timer); timer = setTimeout(refresh, 80); });
  source.onerror = function () { setLive('down', 'reconnecting'); };
  function cards() { return Array.prototype.slice.call(list.querySelectorAll('article[data-item-id]')); }
  function find(id) { var all = cards(); for (var i = 0; i < all.length; i++) if (all[i].getAttribute('data-item-id') === id) return all[i]; return null; }
  function fetchItem(id) {
    return fetch('/inbox/items/' + encodeURIComponent(id) + query, { credentials: 'same-origin' }).then(function (r) {
      if (r.status !== 200) return null;
      return r.text().then(function (text) { var t = document.createElement('template'); t.innerHTML = text; return t.content.firstElementChild; });
    });
  }
  function refresh() {
    if (running) { again = true; return; }
    running = true;
    fetch('/inbox/ids' + query, { credentials: 'same-origin', headers: { accept: 'application/json' } })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (body) {
        if (!body) return;
        var wanted = {};
        body.items.forEach(function (item) { wanted[item.id] = item.status; });
        var work = [];
        cards().forEach(function (el) {
          var id = el.getAttribute('data-item-id');
          if (!(id in wanted)) { el.remove(); return; }
          if (wanted[id] !== el.getAttribute('data-status')) work.push(fetchItem(id).then(function (fresh) { if (fresh) el.replaceWith(fresh); }));
        });
        return Promise.all(work).then(function () {
          var chain = Promise.resolve(null);
          body.items.forEach(function (item) {
            chain = chain.then(function (previous) {
              var el = find(item.id);
              if (el) return el;
              return fetchItem(item.id).then(function (fresh) {
                if (!fresh) return previous;
                if (previous) previous.after(fresh); else list.prepend(fresh);
                return fresh;
              });
            });
          });
          return chain;
        }).then(function () {
          var count = document.getElementById('item-count');
          if (count) count.textContent = String(cards().length);
          var empty = document.getElementById('empty');
          if (empty) empty.hidden = cards().length > 0;
          document.body.setAttribute('data-inbox-updates', String(Number(document.body.getAttribute('data-inbox-updates') || '0') + 1));
        });
      })
      .catch(function () { setLive('down', 'update failed'); })
      .then(function () { running = false; if (again) { again = false; refresh(); } });
  }
})();
`;
