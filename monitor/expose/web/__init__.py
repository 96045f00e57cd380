"""The web application (`app.create_app`): the JSON API (`api/`), the dashboard pages (`pages/`),
what every route shares (`context`, `identity`, `inputs`), the dashboard's colours (`health`) and
charts (`charts`), and the server that runs it (`server`)."""
