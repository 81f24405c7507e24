/* The refresh loop of the pages that watch a conversation: the desk's queue and conversation
 * pages and the playground.
 *
 * falaiPoll({url, everyMs, apply, note, when}) fetches url() every everyMs milliseconds (skipping
 * a round when when() says false) and hands the JSON of a good answer to apply(body). A poll
 * that fails (no answer, an error status, or an answer that is not the JSON the page asked for,
 * such as the login page once the session has expired) shows the element with id `note` with
 * the reason in its `.falai-poll-why`; the next good answer hides it again. A page that stopped refreshing says so: it never goes stale quietly.
 */
(function () {
  "use strict";

  function showFailure(note, reason) {
    if (!note) { return; }
    var why = note.querySelector(".falai-poll-why");
    if (why) { why.textContent = reason; }
    note.hidden = false;
  }

  function clearFailure(note) {
    if (note) { note.hidden = true; }
  }

  window.falaiPoll = function (options) {
    var note = document.getElementById(options.note);
    function poll() {
      if (options.when && !options.when()) {
        setTimeout(poll, options.everyMs);
        return;
      }
      fetch(options.url(), {credentials: "same-origin", headers: {"Accept": "application/json"}})
        .then(function (response) {
          if (!response.ok) { throw new Error("HTTP " + response.status); }
          var type = response.headers.get("Content-Type") || "";
          if (type.indexOf("application/json") !== 0) { throw new Error("not signed in?"); }
          return response.json();
        })
        .then(function (body) {
          clearFailure(note);
          options.apply(body);
        })
        .catch(function (error) {
          showFailure(note, (error && error.message) || String(error));
          if (window.console) { window.console.warn("falai: the page's refresh failed:", error); }
        })
        .finally(function () { setTimeout(poll, options.everyMs); });
    }
    setTimeout(poll, options.everyMs);
  };
})();
