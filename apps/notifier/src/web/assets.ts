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
.live[data-state="ended"], .live[data-state="down"] { background:#fde7e6; color:var(--danger); }
.live[data-state="waiting"] { background:#fff4e0; color:#8a5300; }
.inbox-head { display:flex; align-items:center; gap:12px; flex-wrap:wrap; }
.inbox-head h1 { margin-right:4px; }
a.skip { position:absolute; left:8px; top:-60px; background:#fff; color:var(--primary); padding:8px 12px; border:2px solid var(--primary); border-radius:4px; z-index:10; }
a.skip:focus { top:8px; }
.banner.webhooks ul { margin:6px 0 0; padding-left:20px; }
.banner.note { border-color:#f0c36d; background:#fff8e6; display:flex; flex-wrap:wrap; align-items:center; gap:8px; }
.banner:focus, #items:focus, article.item h2:focus { outline:2px solid var(--primary); outline-offset:2px; }
details.detail { margin-top:6px; font-size:13px; color:var(--muted); }
a.btn { display:inline-block; text-decoration:none; padding:6px 14px; border-radius:4px; }
a.btn.primary { background:var(--primary); color:#fff; }
button.btn[disabled] { opacity:.5; cursor:not-allowed; }
article.item[data-kept] { border-color:#f0c36d; }
pre.draft { background:#fff; border:1px dashed var(--line); }
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

/**
 * The live inbox's script (what each line does is said in its opening comment). Plain ES2017 for
 * every current browser, no build step; it reads no agent text except as server-escaped fragments
 * and writes text only through textContent.
 */
export const INBOX_SCRIPT = String.raw`'use strict';
// The live inbox.
// One live stream per browser, however many inbox tabs are open: the tabs of this origin elect one
// (the Web Locks API where the page has it — a secure context: HTTPS or localhost — else an
// election over a BroadcastChannel: heartbeats, the lower id keeps it) that holds the EventSource
// on /v1/events/stream and relays what it hears to the others over a BroadcastChannel; when that
// tab closes another takes over. A tab takes part only while it is visible: with no inbox tab
// visible for 5 s no stream is held, and a tab that becomes visible again catches up at once.
// (Without BroadcastChannel each tab holds its own stream, as before.)
// A refused (re)connect is probed for its status: 401 → the session ended (the page says so and
// links to the sign-in page); 429 too_many_streams → tried again after Retry-After, backing off,
// until a place frees up; 503 revocations_unavailable (the token revocation log cannot be read: an
// outage, the session stands) → tried again after Retry-After, backing off. A network drop is the EventSource's own retry. "event: closed" with
// token_invalid or session_ended ends the session too.
// On each inbox change a tab fetches the ids its own page selects (its filters, page size and
// cursor) and reconciles its list: new items are fetched as server-rendered (escaped) fragments,
// changed ones replaced, gone ones removed (the focus moves to the next item) — except an item
// whose form has the focus or typed text: it stays, marked with what became of it (answered by
// whom, when), its buttons disabled and the text kept. What is typed in a form is also kept in
// this tab's sessionStorage until the answer is applied: after a sign-in, or a refused answer, the
// page puts it back.
(function () {
  var list = document.getElementById('items');
  if (!list) return;
  var live = document.getElementById('live-status');
  var noticeBox = document.getElementById('live-notice');
  var query = list.getAttribute('data-query') || '';
  var STREAM = '/v1/events/stream';
  var LOCK = 'baton-inbox-stream';
  var CHANNEL = 'baton-inbox-live';
  var DRAFTS = 'baton-inbox-drafts';
  var HIDDEN_GRACE_MS = 5000;
  var BEAT_MS = 2000;
  var BEAT_TIMEOUT_MS = 5000;
  // Who is signed in (the header's name, role and projects): typed text is put back for the same operator only.
  var who = (function () { var el = document.querySelector('[data-testid="who"]'); return el ? el.textContent.replace(/\s+/g, ' ').trim() : ''; })();
  var slice = function (xs) { return Array.prototype.slice.call(xs); };
  var isLogin = function (url) { try { return new URL(url).pathname === '/login'; } catch (e) { return false; } };

  // ------------------------------------------------------------------ the page
  var ended = false;
  function setLive(state, text) {
    if (!live || (live.getAttribute('data-state') === state && live.textContent === text)) return;
    live.setAttribute('data-state', state);
    live.textContent = text;
  }
  function cards() { return slice(list.querySelectorAll('article[data-item-id]')); }
  function find(id) { var all = cards(); for (var i = 0; i < all.length; i++) if (all[i].getAttribute('data-item-id') === id) return all[i]; return null; }
  function cardOf(el) { return el && el.closest ? el.closest('article[data-item-id]') : null; }
  function focusOn(el) { if (!el) return; if (!el.hasAttribute('tabindex')) el.setAttribute('tabindex', '-1'); el.focus(); }
  function counts() {
    var shown = cards().filter(function (c) { return !c.hasAttribute('data-kept'); }).length;
    var count = document.getElementById('item-count');
    if (count) count.textContent = String(shown);
    var empty = document.getElementById('empty');
    if (empty) empty.hidden = cards().length > 0;
  }
  function dismissButton(onClick) {
    var b = document.createElement('button');
    b.type = 'button';
    b.className = 'btn';
    b.textContent = 'Dismiss';
    b.setAttribute('data-testid', 'dismiss');
    b.addEventListener('click', onClick);
    return b;
  }
  // A note on a card (text only: never markup).
  function note(card, kind, text, dismissable) {
    var old = card.querySelector('[data-note]');
    if (old) old.remove();
    var box = document.createElement('div');
    box.className = 'banner note';
    box.setAttribute('role', 'status');
    box.setAttribute('data-note', kind);
    box.setAttribute('data-testid', 'item-note');
    var span = document.createElement('span');
    span.textContent = text;
    box.appendChild(span);
    if (dismissable) box.appendChild(dismissButton(function () { forget(card.getAttribute('data-item-id')); removeCard(card); }));
    var h = card.querySelector('h2');
    if (h) h.after(box); else card.prepend(box);
    return box;
  }
  // Remove a card; when the focus was in it, it goes to the next item (else the previous one, else the list).
  function removeCard(card) {
    var had = card.contains(document.activeElement);
    var next = sibling(card, 'nextElementSibling') || sibling(card, 'previousElementSibling');
    card.remove();
    counts();
    if (had) focusOn(next ? next.querySelector('h2') || next : list);
  }
  function sibling(card, way) { var el = card[way]; while (el && !(el.matches && el.matches('article[data-item-id]'))) el = el[way]; return el; }
  function swap(el, fresh) { var had = el.contains(document.activeElement); el.replaceWith(fresh); if (had) focusOn(fresh.querySelector('h2') || fresh); }
  function fetchCard(id, q) {
    return fetch('/inbox/items/' + encodeURIComponent(id) + q, { credentials: 'same-origin' }).then(function (r) {
      if (r.status !== 200 || r.redirected) return null;
      return r.text().then(function (text) {
        var t = document.createElement('template');
        t.innerHTML = text;
        var el = t.content.firstElementChild;
        return el && el.matches('article[data-item-id]') ? el : null;
      });
    });
  }
  // What became of an item, from its card as it is now (answered by whom, when).
  function whatBecame(fresh) {
    if (!fresh) return 'It left the inbox.';
    var status = fresh.getAttribute('data-status');
    var by = fresh.getAttribute('data-closed-by');
    var at = fresh.getAttribute('data-closed-at');
    var how = fresh.getAttribute('data-resolution') || '';
    var when = at ? ' at ' + at : '';
    if (status === 'answered') return 'Answered by ' + (by || 'someone else') + (how.indexOf(':') > 0 ? ' (' + how.slice(how.indexOf(':') + 1) + ')' : '') + when + '.';
    if (status === 'closed') return 'Closed' + (how ? ' (' + how + ')' : '') + (by ? ' by ' + by : '') + when + '.';
    return 'It no longer belongs on this page (its filters or page).';
  }

  // ------------------------------------------------------------------ what is typed
  function loadDrafts() {
    try { var d = JSON.parse(sessionStorage.getItem(DRAFTS) || '{}'); return d && typeof d === 'object' ? d : {}; } catch (e) { return {}; }
  }
  function saveDrafts(d) {
    try { if (Object.keys(d).length > 0) sessionStorage.setItem(DRAFTS, JSON.stringify(d)); else sessionStorage.removeItem(DRAFTS); } catch (e) { /* storage off or full */ }
  }
  function inputs(form) {
    return slice(form.elements).filter(function (f) {
      return f.name && (f.tagName === 'TEXTAREA' || f.tagName === 'SELECT' || (f.tagName === 'INPUT' && ['hidden', 'submit', 'button'].indexOf(f.type) < 0));
    });
  }
  function changed(f) {
    if (f.tagName === 'SELECT') {
      var first = slice(f.options).filter(function (o) { return o.defaultSelected; })[0] || f.options[0];
      return f.value !== (first ? first.value : '');
    }
    return f.value !== f.defaultValue;
  }
  function typed(card) { var form = card.querySelector('form.answer'); return !!form && inputs(form).some(changed); }
  function titleOf(card) { var h = card.querySelector('h2'); return h ? h.textContent : ''; }
  function remember(card) {
    var id = card.getAttribute('data-item-id');
    var form = card.querySelector('form.answer');
    if (!id || !form) return;
    var d = loadDrafts();
    var entry = {};
    var any = false;
    inputs(form).forEach(function (f) { if (changed(f)) { entry[f.name] = f.value; any = true; } });
    if (any) { entry['@title'] = titleOf(card); entry['@who'] = who; d[id] = entry; } else delete d[id];
    saveDrafts(d);
  }
  function forget(id) { var d = loadDrafts(); if (id in d) { delete d[id]; saveDrafts(d); } }
  function rememberAll() { cards().forEach(function (c) { if (typed(c)) remember(c); }); }
  function onEdit(e) { var c = cardOf(e.target); if (c) remember(c); }
  list.addEventListener('input', onEdit);
  list.addEventListener('change', onEdit);
  list.addEventListener('submit', function (e) {
    var c = cardOf(e.target);
    if (!c) return;
    remember(c);
    try { sessionStorage.setItem(DRAFTS + ':sent', c.getAttribute('data-item-id')); } catch (x) { /* storage off */ }
  });
  document.addEventListener('submit', function (e) {
    // Signing out: what was typed is not left for whoever signs in next in this tab.
    if (e.target && e.target.getAttribute('action') === '/logout') try { sessionStorage.removeItem(DRAFTS); sessionStorage.removeItem(DRAFTS + ':sent'); } catch (x) { /* storage off */ }
  });
  function restoreDrafts() {
    var d = loadDrafts();
    var sent = null;
    try { sent = sessionStorage.getItem(DRAFTS + ':sent'); sessionStorage.removeItem(DRAFTS + ':sent'); } catch (e) { /* storage off */ }
    // The answer this tab sent was taken (the page says so): its text is spent.
    if (sent && document.querySelector('[data-testid="sent"]')) delete d[sent];
    var elsewhere = [];
    Object.keys(d).forEach(function (id) {
      // Typed by another operator signed in earlier in this tab: not theirs to see.
      if (d[id]['@who'] !== who) { delete d[id]; return; }
      var card = find(id);
      var form = card && card.querySelector('form.answer');
      if (!form) { elsewhere.push(id); return; }
      var put = false;
      inputs(form).forEach(function (f) {
        if (Object.prototype.hasOwnProperty.call(d[id], f.name) && !changed(f)) { f.value = d[id][f.name]; put = true; }
      });
      if (put) note(card, 'restored', 'Put back what you typed here earlier in this tab (not sent yet).', false);
    });
    saveDrafts(d);
    elsewhere.forEach(unsent);
  }
  // Text typed for an item this page does not show with a form: kept for when it does, unless the
  // item was answered or closed meanwhile — then the page shows the text, and says so.
  function unsent(id) {
    fetchCard(id, '?status=any').then(function (fresh) {
      if (fresh && fresh.getAttribute('data-status') === 'open') return;
      var entry = loadDrafts()[id];
      if (!entry || !noticeBox) return;
      var box = document.createElement('div');
      box.className = 'banner note';
      box.setAttribute('role', 'status');
      box.setAttribute('data-testid', 'unsent-draft');
      var span = document.createElement('span');
      span.textContent = 'Not sent: what you typed for "' + (entry['@title'] || id) + '". ' + whatBecame(fresh);
      box.appendChild(span);
      Object.keys(entry).forEach(function (k) {
        if (k.charAt(0) === '@') return;
        var pre = document.createElement('pre');
        pre.className = 'draft';
        pre.textContent = entry[k];
        box.appendChild(pre);
      });
      box.appendChild(dismissButton(function () { forget(id); box.remove(); focusOn(list); }));
      noticeBox.appendChild(box);
    });
  }

  // ------------------------------------------------------------------ the list
  var timer = null;
  var running = false;
  var again = false;
  function schedule() { if (ended) return; clearTimeout(timer); timer = setTimeout(refresh, 80); }
  function refresh() {
    if (ended) return;
    if (running) { again = true; return; }
    running = true;
    fetch('/inbox/ids' + query, { credentials: 'same-origin', headers: { accept: 'application/json' } })
      .then(function (r) {
        if (r.redirected && isLogin(r.url)) { endSession('session_ended'); return null; }
        return r.ok ? r.json() : null;
      })
      .then(function (body) { return body ? reconcile(body) : null; })
      .catch(function () { if (!ended) setLive('down', 'update failed'); })
      .then(function () { running = false; if (again) { again = false; refresh(); } });
  }
  // An item someone is on: its form has the focus, or text typed in it.
  function busy(card) {
    var a = document.activeElement;
    return (!!a && a !== document.body && card.contains(a) && !!a.closest('form.answer')) || typed(card);
  }
  // Keep a card someone is on: say what became of the item, disable its buttons, keep the text.
  function keep(card) {
    var had = card.contains(document.activeElement);
    card.setAttribute('data-kept', 'true');
    slice(card.querySelectorAll('form.answer button')).forEach(function (b) { b.disabled = true; });
    remember(card);
    return fetchCard(card.getAttribute('data-item-id'), '?status=any').catch(function () { return null; }).then(function (fresh) {
      if (fresh) {
        card.setAttribute('data-status', fresh.getAttribute('data-status') || '');
        var badge = card.querySelector('[data-testid="status"]');
        var now = fresh.querySelector('[data-testid="status"]');
        if (badge && now) badge.textContent = now.textContent;
      }
      var box = note(card, 'left', whatBecame(fresh) + ' What you typed below was not sent; it stays until you dismiss this item.', true);
      // A disabled button loses the focus: it goes to the note.
      if (had && !card.contains(document.activeElement)) focusOn(box);
    });
  }
  function reconcile(body) {
    var wanted = {};
    body.items.forEach(function (item) { wanted[item.id] = item.status; });
    var work = [];
    cards().forEach(function (el) {
      if (el.hasAttribute('data-kept')) return;
      var id = el.getAttribute('data-item-id');
      if (!(id in wanted)) {
        if (busy(el)) work.push(keep(el));
        else { forget(id); removeCard(el); }
        return;
      }
      if (wanted[id] !== el.getAttribute('data-status')) {
        if (busy(el)) work.push(keep(el));
        else work.push(fetchCard(id, query).then(function (fresh) { if (fresh) swap(el, fresh); else removeCard(el); }));
      }
    });
    return Promise.all(work)
      .then(function () {
        var chain = Promise.resolve(null);
        body.items.forEach(function (item) {
          chain = chain.then(function (previous) {
            var el = find(item.id);
            if (el) return el;
            return fetchCard(item.id, query).then(function (fresh) {
              if (!fresh || find(item.id)) return previous;
              if (previous) previous.after(fresh); else list.prepend(fresh);
              return fresh;
            });
          });
        });
        return chain;
      })
      .then(function () {
        counts();
        // The open items the filters select (not the page's): the server counted them.
        var open = document.getElementById('open-count');
        if (open && typeof body.open_count === 'number') open.textContent = String(body.open_count);
        document.body.setAttribute('data-inbox-updates', String(Number(document.body.getAttribute('data-inbox-updates') || '0') + 1));
      });
  }

  // ------------------------------------------------------------------ the session
  function show(state) {
    if (!state || ended) return;
    if (state.s === 'ended') return confirmEnded(state.reason);
    setLive(state.s, state.text);
  }
  // Another tab's stream says the session ended: this page checks for itself (it may have just signed in).
  function confirmEnded(reason) {
    fetch('/inbox/ids' + query, { credentials: 'same-origin', headers: { accept: 'application/json' } }).then(function (r) {
      if (r.redirected && isLogin(r.url)) endSession(reason);
      else post({ k: 'hello', fresh: true });
    }, function () { /* the network: the stream says so */ });
  }
  function endSession(reason) {
    if (ended) return;
    ended = true;
    clearTimeout(timer);
    setLive('ended', 'session ended');
    rememberAll();
    if (!noticeBox) return;
    var box = document.createElement('div');
    box.className = 'banner error';
    box.setAttribute('role', 'alert');
    box.setAttribute('data-testid', 'session-ended');
    var why = reason === 'token_invalid' || reason === 'revoked' || reason === 'expired' ? 'the token was revoked or has expired' : 'signed out, or the session expired';
    var text = document.createElement('span');
    text.textContent = 'Your session ended (' + why + '): live updates stopped, and an answer sent from this page would be refused. What you typed stays on this page and in this tab. ';
    var link = document.createElement('a');
    link.href = '/login?next=' + encodeURIComponent('/inbox' + query);
    link.textContent = 'Sign in again';
    link.setAttribute('data-testid', 'sign-in');
    link.addEventListener('click', function (e) {
      rememberAll();
      // Signed in again meanwhile (in another tab): reload this page instead, which puts the text back.
      e.preventDefault();
      fetch('/inbox/ids' + query, { credentials: 'same-origin' }).then(function (r) {
        location.assign(r.redirected && isLogin(r.url) ? link.href : '/inbox' + query);
      }, function () { location.assign(link.href); });
    });
    var after = document.createElement('span');
    after.textContent = ' — then this page comes back with it.';
    box.appendChild(text);
    box.appendChild(link);
    box.appendChild(after);
    noticeBox.appendChild(box);
  }

  // ------------------------------------------------------------------ one stream per browser
  var me = Date.now().toString(36) + '-' + Math.random().toString(36).slice(2, 10);
  var channel = null;
  try { channel = typeof BroadcastChannel === 'function' ? new BroadcastChannel(CHANNEL) : null; } catch (e) { channel = null; }
  var locks = channel && navigator.locks && typeof navigator.locks.request === 'function' && typeof AbortController === 'function' ? navigator.locks : null;
  var mode = typeof EventSource !== 'function' ? 'none' : !channel ? 'solo' : locks ? 'locks' : 'channel';
  document.body.setAttribute('data-live-mode', mode);
  var role = 'idle';
  function setRole(r) { role = r; document.body.setAttribute('data-live-role', r); }
  setRole('idle');
  function post(m) { if (!channel) return; m.from = me; try { channel.postMessage(m); } catch (e) { /* closed */ } }

  // The leader's stream, and what it tells the other tabs.
  var source = null;
  var current = { s: 'connecting', text: 'connecting' };
  var retryTimer = null;
  var failures = 0;
  var probing = null;
  var beats = null;
  function announce(s, text, reason) {
    current = { s: s, text: text, reason: reason };
    if (s === 'ended') endSession(reason); else show(current);
    post({ k: 'state', state: current });
  }
  function emit(type) { schedule(); post({ k: 'ev', type: type }); }
  function openStream() {
    stopStream();
    var s = new EventSource(STREAM);
    source = s;
    s.addEventListener('ready', function () { if (s !== source) return; failures = 0; announce('live', 'live'); emit('ready'); });
    s.addEventListener('inbox', function () { if (s === source) emit('inbox'); });
    s.addEventListener('closed', function (e) {
      if (s !== source) return;
      var reason = 'closed';
      try { reason = JSON.parse(e.data).reason || reason; } catch (x) { /* no reason */ }
      if (reason === 'token_invalid' || reason === 'session_ended') { stopStream(); announce('ended', 'session ended', reason); }
      else announce('reconnecting', 'reconnecting (' + reason + ')');
    });
    s.onerror = function () {
      if (s !== source) return;
      // CLOSED: the (re)connect was refused (not 200), which the browser never retries: ask why.
      if (s.readyState === 2) { stopStream(); probe(); }
      else announce('reconnecting', 'reconnecting');
    };
  }
  function stopStream() {
    clearTimeout(retryTimer);
    retryTimer = null;
    if (probing) { probing.abort(); probing = null; }
    if (source) { var s = source; source = null; s.close(); }
  }
  function delay(atLeast) {
    failures++;
    return Math.max(atLeast, Math.min(60000, 1000 * Math.pow(2, Math.min(failures, 6)))) + Math.random() * 1000;
  }
  function retry(ms, s, text) {
    announce(s, text + '; trying again in ' + Math.round(ms / 1000) + ' s');
    clearTimeout(retryTimer);
    retryTimer = setTimeout(function () { retryTimer = null; if (role === 'leader') openStream(); }, ms);
  }
  function probe() {
    var ctl = new AbortController();
    probing = ctl;
    announce('reconnecting', 'reconnecting');
    fetch(STREAM, { credentials: 'same-origin', cache: 'no-store', headers: { accept: 'text/event-stream' }, signal: ctl.signal }).then(
      function (r) {
        if (probing !== ctl) { ctl.abort(); return; }
        if (r.status === 200) { ctl.abort(); probing = null; retry(delay(0), 'reconnecting', 'reconnecting'); return; }
        return r.json().catch(function () { return {}; }).then(function (body) {
          if (probing !== ctl) return;
          probing = null;
          var error = (body && body.error) || {};
          if (r.status === 401) announce('ended', 'session ended', (error.details && error.details.reason) || 'session_ended');
          else if (r.status === 503 && error.code === 'revocations_unavailable') retry(delay(1000 * (Number(r.headers.get('retry-after')) || 2)), 'down', 'sign-ins cannot be checked just now; trying again shortly');
          else if (r.status === 429) retry(delay(1000 * (Number(r.headers.get('retry-after')) || 10)), 'waiting', 'waiting for a free live stream (' + (error.code || 'too_many_streams') + ')');
          else retry(delay(0), 'down', 'live updates refused (' + (error.code || r.status) + ')');
        });
      },
      function () {
        if (probing !== ctl) return;
        probing = null;
        retry(delay(0), 'reconnecting', 'reconnecting');
      },
    );
  }

  // Who holds the stream.
  var lockAbort = null;
  var releaseLock = null;
  var lastBeat = 0;
  function becomeLeader() {
    setRole('leader');
    failures = 0;
    announce('connecting', 'connecting');
    openStream();
    if (mode === 'channel') {
      post({ k: 'beat', state: current });
      beats = setInterval(function () { post({ k: 'beat', state: current }); }, BEAT_MS);
    }
  }
  function resign() {
    stopStream();
    clearInterval(beats);
    beats = null;
    post({ k: 'bye' });
    if (releaseLock) { var r = releaseLock; releaseLock = null; r(); }
  }
  // Take part: lead, or follow the tab that leads.
  function join() {
    if (role !== 'idle' || mode === 'none') return;
    if (mode === 'solo') { becomeLeader(); return; }
    setRole('follower');
    post({ k: 'hello', fresh: !ended });
    if (mode === 'locks') {
      var ctl = new AbortController();
      lockAbort = ctl;
      locks.request(LOCK, { signal: ctl.signal }, function () {
        if (lockAbort === ctl) lockAbort = null;
        if (role !== 'follower') return null;
        becomeLeader();
        return new Promise(function (resolve) { releaseLock = resolve; });
      }).catch(function () { /* withdrawn before it was granted */ });
    } else {
      lastBeat = Date.now() - BEAT_TIMEOUT_MS + 1000;
    }
  }
  // Stop taking part (hidden for a while, or leaving the page).
  function leave() {
    if (lockAbort) { lockAbort.abort(); lockAbort = null; }
    if (role === 'leader') resign();
    if (role !== 'idle') setRole('idle');
  }
  if (mode === 'channel') setInterval(function () { if (role === 'follower' && Date.now() - lastBeat > BEAT_TIMEOUT_MS) becomeLeader(); }, 500);
  if (channel) channel.onmessage = function (e) {
    var m = e.data || {};
    if (m.from === me) return;
    if (m.k === 'ev') { if (role !== 'leader') schedule(); }
    else if (m.k === 'state') { if (role !== 'leader') show(m.state); }
    else if (m.k === 'beat') {
      lastBeat = Date.now();
      // Two leaders (they claimed at once): the lower id keeps it.
      if (role === 'leader' && mode === 'channel' && String(m.from) < me) { stopStream(); clearInterval(beats); beats = null; setRole('follower'); }
      if (role !== 'leader') show(m.state);
    } else if (m.k === 'hello') {
      if (role !== 'leader') return;
      // A page that just loaded has a session: a stream that ended with the last one is tried again.
      if (current.s === 'ended' && m.fresh) { failures = 0; announce('connecting', 'connecting'); openStream(); }
      else post({ k: mode === 'channel' ? 'beat' : 'state', state: current });
    } else if (m.k === 'bye') {
      if (mode === 'channel' && role === 'follower') lastBeat = Date.now() - BEAT_TIMEOUT_MS + Math.random() * 300;
    }
  };

  // Visibility: only visible tabs hold (or wait for) the stream.
  var hideTimer = null;
  function isVisible() { return document.visibilityState !== 'hidden'; }
  document.addEventListener('visibilitychange', function () {
    if (isVisible()) {
      clearTimeout(hideTimer);
      hideTimer = null;
      if (role === 'idle') { join(); schedule(); }
    } else if (role !== 'idle' && !hideTimer) {
      hideTimer = setTimeout(function () {
        hideTimer = null;
        if (isVisible()) return;
        leave();
        if (!ended) setLive('paused', 'paused while hidden');
      }, HIDDEN_GRACE_MS);
    }
  });
  window.addEventListener('pagehide', function () { clearTimeout(hideTimer); hideTimer = null; leave(); });
  window.addEventListener('pageshow', function (e) { if (e.persisted && isVisible() && role === 'idle') { join(); schedule(); } });

  // ------------------------------------------------------------------ start
  restoreDrafts();
  // After an answer (or a refusal) the focus goes to what the page says about it.
  var said = document.querySelector('[data-testid="sent"]') || document.querySelector('[data-testid="refused"]');
  if (said) focusOn(said);
  if (mode === 'none') setLive('down', 'no live updates in this browser');
  else if (isVisible()) join();
  else setLive('paused', 'paused while hidden');
})();
`;
