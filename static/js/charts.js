/* Draw every server-built plotly figure in newly loaded content.
   A figure travels as JSON in <script type="application/json" id="…-data">; the chart div
   names it in data-plotly-figure. htmx.onLoad runs for the page and for every swapped
   fragment, so polled partials redraw their charts. */
(function () {
  "use strict";
  function draw(root) {
    if (!window.Plotly || !root.querySelectorAll) return;
    root.querySelectorAll("[data-plotly-figure]").forEach(function (el) {
      var src = document.getElementById(el.getAttribute("data-plotly-figure"));
      if (!src) return;
      var fig = JSON.parse(src.textContent);
      window.Plotly.newPlot(el, fig.data, fig.layout, {responsive: true, displaylogo: false});
    });
  }
  if (window.htmx) {
    window.htmx.onLoad(draw);
  } else {
    document.addEventListener("DOMContentLoaded", function () { draw(document); });
  }
})();
