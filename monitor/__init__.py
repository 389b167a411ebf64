"""tierwatch's Django project and app: storage, scheduling, pages, alerts, reports.

The Celery app is imported here so that ``@shared_task`` binds to it whenever Django starts.
"""

from monitor.celery import app as celery_app

__all__ = ["celery_app"]
