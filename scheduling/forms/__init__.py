"""Dashboard forms. Each one validates through the same service (or API serializer) as the REST API, so a
form shows the API's messages word for word, next to the field they name."""
