"""AsyncClient against a live ichido: the same calls and retry rules as Client, from asyncio
tasks running at once, through a proxy that loses answers."""

from __future__ import annotations

import asyncio
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "testing"))

import ichido  # noqa: E402
from ichido import AsyncClient  # noqa: E402
from ichido_testing import LossyProxy, Server  # noqa: E402

NS = "py-async"


class AsyncClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server().start()
        cls.writer = cls.server.token("writer", NS)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def run_async(self, coro):
        return asyncio.run(asyncio.wait_for(coro, 120))

    def test_numbers_same_key_same_number_and_errors_by_subclass(self):
        self.server.admin("PUT", f"/v1/ns/{NS}/counters/receipts", {"format": "R-{seq:4}", "require_key": True, "max": 30})

        async def main():
            async with AsyncClient(self.server.url, self.writer, NS) as c:
                numbers = await asyncio.gather(*(c.next_number("receipts", f"form-{i % 20}") for i in range(40)))
                with self.assertRaises(ichido.CounterNotFound):
                    await c.next_number("nope", "k")
                return numbers

        numbers = self.run_async(main())
        by_key = {}
        for i, n in enumerate(numbers):
            by_key.setdefault(i % 20, set()).add(n.formatted)
        self.assertTrue(all(len(v) == 1 for v in by_key.values()), "one number per key")
        self.assertEqual(sorted(v.pop() for v in by_key.values()), [f"R-{i:04d}" for i in range(1, 21)])

    def test_once_from_twenty_tasks_runs_the_work_once_and_all_get_its_result(self):
        ran = []

        async def work(ctx):
            ran.append(ctx.attempt)
            await asyncio.sleep(0.2)
            return {"ticket": "T-1", "attempt": ctx.attempt}

        async def main():
            async with AsyncClient(self.server.url, self.writer, NS) as c:
                return await asyncio.gather(*(c.once("mail-1", work, lease=5, wait=10) for _ in range(20)))

        results = self.run_async(main())
        self.assertEqual(ran, [1])
        self.assertEqual(results, [{"ticket": "T-1", "attempt": 1}] * 20)

    def test_a_lost_begin_answer_is_replayed_and_a_503_retried(self):
        dropped, faked = [], []

        def policy(req):
            if req["path"].endswith("/once/begin") and not dropped:
                dropped.append(1)
                return "drop_answer"
            if req["path"].endswith("/once/complete") and not faked:
                faked.append(1)
                return {"status": 503, "body": {"error": {"code": "store_unavailable", "message": "x", "details": {}}}}
            return "pass"

        proxy = LossyProxy(self.server.port, policy)
        self.addCleanup(proxy.close)

        async def main():
            async with AsyncClient(proxy.url, self.writer, NS) as c:
                return await c.once("lost-begin", lambda: "done")

        self.assertEqual(self.run_async(main()), "done")
        begins = proxy.requests("/once/begin")
        self.assertEqual(len(begins), 2)
        self.assertEqual(begins[0]["body"]["request_id"], begins[1]["body"]["request_id"])
        self.assertEqual(len(proxy.requests("/once/complete")), 2, "the 503 was retried")
        self.assertEqual(len(proxy.requests("/once/fail")), 0)

    def test_lock_excludes_other_tasks_and_times_out_naming_the_holder(self):
        shared = {"n": 0}

        async def bump(c):
            async with c.lock("ledger", wait=30, lease=5):
                v = shared["n"]
                await asyncio.sleep(0.01)
                shared["n"] = v + 1

        async def main():
            clients = [AsyncClient(self.server.url, self.writer, NS, owner=f"task-{i}") for i in range(10)]
            try:
                await asyncio.gather(*(bump(c) for c in clients))
                async with clients[0].lock("printer", wait=0):
                    with self.assertRaises(ichido.LockTimeout) as cm:
                        async with clients[1].lock("printer", wait=0.2):
                            pass
                    return cm.exception.details["holder"]["owner"]
            finally:
                for c in clients:
                    await c.aclose()

        self.assertEqual(self.run_async(main()), "task-0")
        self.assertEqual(shared["n"], 10)

    def test_the_decorator_on_an_async_function(self):
        calls = []

        async def main():
            async with AsyncClient(self.server.url, self.writer, NS) as c:

                @c.once(key=lambda order_id: f"order-{order_id}")
                async def send(order_id):
                    calls.append(order_id)
                    return {"sent": order_id}

                return [await send(1), await send(1), await send(2)]

        self.assertEqual(self.run_async(main()), [{"sent": 1}, {"sent": 1}, {"sent": 2}])
        self.assertEqual(calls, [1, 2])


if __name__ == "__main__":
    unittest.main()
