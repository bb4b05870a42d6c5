#!/usr/bin/env python3
"""Loopback TCP proxy that limits each connection's download (server -> client) bandwidth.

usage: bwproxy.py LISTEN_PORT UPSTREAM_HOST:PORT BYTES_PER_SEC
Models a store or a path that caps throughput per connection (the case the range engine is
for). Uploads pass unlimited. Stdlib only.
"""
import asyncio, sys, time

listen_port, upstream, rate = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
up_host, up_port = upstream.rsplit(":", 1)
CHUNK = 64 * 1024


async def pipe(reader, writer, limit):
    start, sent = time.monotonic(), 0
    try:
        while True:
            data = await reader.read(CHUNK)
            if not data:
                break
            writer.write(data)
            await writer.drain()
            if limit:
                sent += len(data)
                # Sleep until the bytes sent so far fit the rate (token bucket, no burst).
                ahead = sent / limit - (time.monotonic() - start)
                if ahead > 0:
                    await asyncio.sleep(ahead)
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def handle(cr, cw):
    try:
        sr, sw = await asyncio.open_connection(up_host, int(up_port))
    except OSError:
        cw.close()
        return
    await asyncio.gather(pipe(cr, sw, 0), pipe(sr, cw, rate))


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", listen_port)
    async with server:
        await server.serve_forever()

asyncio.run(main())
