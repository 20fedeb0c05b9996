# The entry points of the demo application: the service passes the request body as one string
# and sends back the one string they return.

svcJsonService <- function(payload) {
  json_write(demo_dispatch(json_parse(payload)))
}

svcXmlService <- function(payload) {
  args <- xml_arguments(payload)
  paste0("<?xml version=\"1.0\" encoding=\"UTF-8\"?>",
         xml_write(paste0(as.character(args$RFunction), "Result"), demo_dispatch(args)))
}
