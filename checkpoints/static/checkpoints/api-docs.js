// Starts Swagger UI on the API docs page. A file, not an inline script, so the page runs
// under a Content-Security-Policy of script-src 'self'; the page's data-* attributes carry
// the schema's URL and the CSRF token.
"use strict";
(function () {
  const root = document.getElementById("swagger-ui");
  const csrfToken = root.dataset.csrfToken;
  window.ui = SwaggerUIBundle({
    url: root.dataset.schemaUrl,
    dom_id: "#swagger-ui",
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
    deepLinking: true,
    // "Try it out" with the admin session: Django wants the CSRF token on writes.
    requestInterceptor: (request) => {
      if (!["GET", "HEAD", undefined].includes(request.method)) {
        request.headers["X-CSRFToken"] = csrfToken;
      }
      return request;
    },
  });
})();
