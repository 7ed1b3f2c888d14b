"""`streamlit` as its command line runs it, with its lookup of this machine's public address off.

Bound to anything but loopback, Streamlit asks `checkip.amazonaws.com` for the machine's public
address (to print an "External URL" and to allow-list WebSocket origins): a dashboard of
captured traffic would contact the internet. Here that lookup answers "unknown"; the local
address is still found (a UDP socket `connect`ed towards 8.8.8.8 only picks a route: no packet
leaves), so a browser on the local network keeps working.
"""

from __future__ import annotations

import sys


def _unknown() -> None:
    """The public address of this machine, as far as the dashboard is concerned."""
    return None


def main() -> None:
    """Run `streamlit` with the rest of the command line."""
    from streamlit import net_util
    from streamlit.web import cli

    net_util.get_external_ip = _unknown
    sys.argv[0] = "streamlit"
    cli.main()


if __name__ == "__main__":
    main()
