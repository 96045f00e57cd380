"""The server-rendered pages: the dashboard (`dashboard`), alerts (`alerts`), collection health
(`collection`) and the retention button (`retention`, its forms and views in `retention_views`)."""
