// Starts Swagger UI on this service's OpenAPI document. A file of its own because the page's
// Content-Security-Policy allows no inline script; both scripts are deferred, so this runs after
// the bundle and before DOMContentLoaded.
'use strict';
window.addEventListener('DOMContentLoaded', function () {
  window.ui = SwaggerUIBundle({
    url: new URL('rest/openapi.json', document.baseURI).href,
    dom_id: '#swagger-ui',
    deepLinking: true,
    // No validator badge: it would be fetched from validator.swagger.io.
    validatorUrl: null,
  });
});
