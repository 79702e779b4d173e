"""``python -m sandbox.broker HOST_DIR``: run one sandbox broker (or KRaft controller) in the foreground.

Exit codes: 0 after a controlled shutdown (SIGTERM), 1 when it cannot start; the reason is logged
to ``HOST_DIR/logs/server.log`` and written to ``HOST_DIR/broker.failed`` (what
``kafka-service status`` shows). ``HOST_DIR/broker.pid`` exists while the broker runs.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from sandbox.broker.config import BrokerConfig, BrokerConfigError
from sandbox.broker.controller_node import ControllerProcess
from sandbox.broker.server import Broker, BrokerStartError, write_pid_file


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox.broker", description=__doc__)
    parser.add_argument("host_dir", type=Path, help="the broker host directory (holds server.properties)")
    args = parser.parse_args(argv)
    host_dir: Path = args.host_dir.resolve()
    (host_dir / "logs").mkdir(parents=True, exist_ok=True)
    logging.basicConfig(
        filename=host_dir / "logs" / "server.log",
        level=logging.INFO,
        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("kazoo").setLevel(logging.WARNING)
    log = logging.getLogger("sandbox.broker")
    failed = host_dir / "broker.failed"
    pid_file = host_dir / "broker.pid"
    failed.unlink(missing_ok=True)
    try:
        config = BrokerConfig.load(host_dir)
        write_pid_file(pid_file)
        asyncio.run(ControllerProcess(config).run() if config.is_controller else Broker(config).run())
    except (BrokerConfigError, BrokerStartError) as exc:
        log.error("Fatal error during KafkaServer startup. Prepare to shutdown: %s", exc)
        failed.write_text(f"{exc}\n", encoding="utf-8")
        print(f"broker failed to start: {exc}", file=sys.stderr)
        return 1
    finally:
        pid_file.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
