"""llama.cpp's server from the prebuilt ``xllamacpp`` wheel, started with llama-server's flags.

``xllamacpp`` ships llama.cpp's own HTTP server (the code ``llama-server`` runs) compiled for
this platform, so the live tier need not build it. This script takes the subset of
``llama-server``'s command line the tier uses, sets the same parameters, serves until it is
sent SIGTERM or SIGINT, and exits 0. It imports nothing from the checkout: the tier runs it
with the cached wheel on ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--alias", default=None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--ctx-size", type=int, default=4096)
    parser.add_argument("--n-predict", type=int, default=-1)
    parser.add_argument("--parallel", type=int, default=1)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--temp", type=float, default=None)
    parser.add_argument("--timeout", type=int, default=600)
    parser.add_argument("--chat-template-file", default=None)
    parser.add_argument("--jinja", action="store_true", default=True)
    parser.add_argument("--no-webui", action="store_true")
    parser.add_argument("--swa-full", action="store_true")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    import xllamacpp

    args = parse(argv)
    params = xllamacpp.CommonParams()
    params.model.path = args.model
    if args.alias:
        params.model_alias = {args.alias}
    params.hostnames = [args.host]
    params.port = args.port
    params.n_ctx = args.ctx_size
    params.n_predict = args.n_predict
    params.n_parallel = args.parallel
    if args.threads > 0:
        params.cpuparams.n_threads = args.threads
        params.cpuparams_batch.n_threads = args.threads
    if args.seed is not None:
        params.sampling.seed = args.seed
    if args.temp is not None:
        params.sampling.temp = args.temp
    params.timeout_read = args.timeout
    params.timeout_write = args.timeout
    params.use_jinja = args.jinja
    if args.no_webui:
        params.ui = False
    params.swa_full = args.swa_full
    if args.chat_template_file:
        with open(args.chat_template_file, encoding="utf-8") as handle:
            params.chat_template = handle.read()
    stop = threading.Event()
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda *_: stop.set())
    server = xllamacpp.Server(params)
    print(f"serving on {server.listening_address}", flush=True)
    stop.wait()
    # The server's native threads are not joined on interpreter exit: leave at once.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
