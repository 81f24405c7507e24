/* A transcript that opens at its newest message and stays there while the person has not
 * scrolled away: the conversation page and the desk.
 *
 * falaiStickToBottom(element) scrolls `element` to its bottom now, and again whenever its box or
 * any of its messages changes size while it was at the bottom. Scrolling once is not enough:
 * Django's admin opens its navigation sidebar from a deferred script (nav_sidebar.js adds
 * `.shifted` to #main after this page's own scripts ran), which narrows the content by the
 * sidebar's width; the messages then wrap onto more lines and the transcript grows under a
 * scroll position measured for the wider layout, leaving the newest message cut off. The same
 * happens with a later font, a resized window or a toggled sidebar.
 *
 * It returns {refresh()}: call it after replacing the transcript's content (the desk's poll), so
 * the new messages are watched too and the transcript follows them if it was at the bottom.
 */
(function () {
  "use strict";

  var SLACK = 40;  // px: a person this close to the bottom is reading the newest messages

  window.falaiStickToBottom = function (element) {
    var pinned = true;
    var placed = null;  // the scrollTop this script last set
    function atBottom() { return element.scrollHeight - element.scrollTop - element.clientHeight <= SLACK; }
    function toBottom() {
      element.scrollTop = element.scrollHeight;
      placed = element.scrollTop;
    }
    // Only the person's own scrolling unpins. A growing transcript fires no scroll event, and the
    // event of this script's own scrolling comes a frame later, when the layout may already have
    // grown under it: still where this script put it means still pinned.
    element.addEventListener("scroll", function () {
      pinned = atBottom() || (placed !== null && Math.abs(element.scrollTop - placed) < 1);
    }, {passive: true});

    var observer = typeof ResizeObserver === "function" ? new ResizeObserver(function () {
      if (pinned) { toBottom(); }
    }) : null;
    function watch() {
      if (!observer) { return; }
      observer.disconnect();
      observer.observe(element);
      for (var i = 0; i < element.children.length; i++) { observer.observe(element.children[i]); }
    }
    watch();
    toBottom();
    window.addEventListener("load", function () { if (pinned) { toBottom(); } });

    return {
      refresh: function () {
        watch();
        if (pinned) { toBottom(); }
      },
    };
  };
})();
