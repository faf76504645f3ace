"""MariaDB/InnoDB engine: the SLOB data set, work loop, statistics and run backend.

Public entry points (wired by the CLI/run controller):
    engine.MariaDBEngine(connect_kwargs)               the Engine interface
    runner.MariaDBRunBackend(connect_kwargs, app_name)  sessions, CALL, cancel, monitors
    stats.snapshot_delta(before, after, seconds)       window metrics (PostgreSQL's keys)
    layout.layout_for(page_size)                       row width and rows per leaf page
The private server lives in openslob.engines.mariadb.server (EmbeddedMariaDB).
"""
