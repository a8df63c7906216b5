"""What the pages and the Node runtime load Pyodide and the harness from (served under
/dist/): the Pyodide wheel of the in-browser part and its lock (`build_wheel`), and the
memory snapshot of Pyodide after start-up (`snapshot`). Below both the runtimes, which
build it before they launch, and the server, which serves it: neither imports the other."""
