"""Runs each `evaluate` Space's `app.py` given on the command line as a Space runs it (its folder the working
folder and the first entry of `sys.path`, `__main__`), with Gradio's blocking launch turned into a launch in the
background; fetches each page, computes the first example row through the Gradio API for the modules named after
`--compute`, closes the page, and prints one JSON line per app."""

import json
import os
import runpy
import sys
import urllib.request

import gradio
from gradio_client import Client

launched = []
blocking_launch = gradio.Blocks.launch


def launch_in_background(self, *args, **kwargs):
    kwargs.update(prevent_thread_lock=True, quiet=True)
    blocking_launch(self, *args, **kwargs)
    launched.append(self)


gradio.Blocks.launch = launch_in_background
apps, computed = sys.argv[1 : sys.argv.index("--compute")], sys.argv[sys.argv.index("--compute") + 1 :]
for app in [os.path.abspath(a) for a in apps]:
    folder = os.path.dirname(app)
    os.chdir(folder)
    sys.path[0] = folder
    runpy.run_path(app, run_name="__main__")
    page = launched.pop()
    status = urllib.request.urlopen(page.local_url, timeout=60).status
    name = os.path.basename(folder)
    result = None
    if name in computed:
        table = page.config["components"]
        value = next(c["props"]["value"] for c in table if c.get("type") == "dataframe")
        result = Client(page.local_url, verbose=False).predict(value, "{}", api_name="/compute")
    page.close()
    print(json.dumps({"app": name, "status": status, "result": result}), flush=True)
