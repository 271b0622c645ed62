"""The Celery application: broker from settings, queue "default", no result backend."""

from celery import Celery

from app.core.config import settings

celery_app = Celery(
    "benchwatch",
    broker=settings.BROKER_URL or "memory://",
    include=["workers.tasks.anomalies"],
)
celery_app.conf.update(
    task_default_queue="default",
    task_ignore_result=True,  # outcomes are database rows, not task results
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)
