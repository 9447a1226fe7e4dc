// orchestra's viewer of runs: shows a step's detail beside the chart when
// a bar is clicked, and keeps the page of a running run up to date. Every
// fragment it inserts was drawn by the server, with every value escaped;
// it builds no markup from data itself.
(function () {
  'use strict';

  // Fetches a fragment of the viewer's own: same origin, with the session cookie.
  function fetchPart(url, etag) {
    var headers = { 'Accept': 'text/html' };
    if (etag) { headers['If-None-Match'] = etag; }
    return fetch(url, { credentials: 'same-origin', headers: headers, cache: 'no-store' });
  }

  // Marks the selected step's row in the chart.
  function markSelected(run, step) {
    var rows = document.querySelectorAll('#gantt g.row');
    for (var i = 0; i < rows.length; i++) {
      var r = rows[i];
      r.classList.toggle('selected', r.getAttribute('data-run') === run && r.getAttribute('data-step') === step);
    }
  }

  var selected = null; // {run, step} shown in the detail panel

  function showStep(link) {
    var detail = document.getElementById('detail');
    var url = link.getAttribute('data-detail');
    var row = link.closest('g.row');
    if (!detail || !url || !row) { return false; }
    selected = { run: row.getAttribute('data-run'), step: row.getAttribute('data-step') };
    markSelected(selected.run, selected.step);
    detail.setAttribute('aria-busy', 'true');
    fetchPart(url).then(function (resp) {
      return resp.text().then(function (text) {
        if (!resp.ok) { throw new Error(text || ('HTTP ' + resp.status)); }
        detail.innerHTML = text;
      });
    }).catch(function (err) {
      detail.textContent = 'The step could not be read: ' + err.message;
    }).then(function () {
      detail.removeAttribute('aria-busy');
    });
    var href = link.getAttribute('href');
    if (href && window.history && history.replaceState) { history.replaceState(null, '', href); }
    return true;
  }

  document.addEventListener('click', function (ev) {
    var link = ev.target.closest && ev.target.closest('a.bar-link');
    if (link && ev.button === 0 && !ev.metaKey && !ev.ctrlKey && !ev.shiftKey && showStep(link)) {
      ev.preventDefault();
    }
  });

  // A running run's page asks for its live part every poll interval; the
  // server answers 304 when nothing moved. It stops once the run ended.
  function follow(live) {
    var src = live.getAttribute('data-src');
    var every = parseInt(live.getAttribute('data-poll'), 10) || 1000;
    var etag = null;
    var wait = every;
    function poll() {
      if (document.hidden) { setTimeout(poll, every); return; }
      fetchPart(src, etag).then(function (resp) {
        if (resp.status === 304) { return null; }
        if (!resp.ok) { throw new Error('HTTP ' + resp.status); }
        etag = resp.headers.get('ETag');
        return resp.text();
      }).then(function (text) {
        wait = every;
        if (text === null) { return true; }
        live.innerHTML = text;
        if (selected) { markSelected(selected.run, selected.step); }
        var head = document.getElementById('run-head');
        var status = head ? head.getAttribute('data-status') : '';
        var still = status === 'running' || status === 'paused';
        live.setAttribute('data-live', still ? '1' : '0');
        return still;
      }).catch(function (err) {
        wait = Math.min(wait * 2, 30000);
        var note = document.getElementById('live-note');
        if (note) { note.textContent = 'Live updates paused (' + err.message + '); retrying.'; note.classList.add('live-error'); }
        return true;
      }).then(function (again) {
        if (again) { setTimeout(poll, wait); }
      });
    }
    setTimeout(poll, every);
  }

  function start() {
    var live = document.getElementById('live');
    if (live && live.getAttribute('data-live') === '1') { follow(live); }
    var sel = document.querySelector('#gantt g.row.selected');
    if (sel) { selected = { run: sel.getAttribute('data-run'), step: sel.getAttribute('data-step') }; }
  }

  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', start);
  } else {
    start();
  }
})();
