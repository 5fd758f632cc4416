from django.apps import AppConfig


class LangGraphApiConfig(AppConfig):
    name = "checkpoints.langgraph_api"
    label = "langgraph_api"
    verbose_name = "LangGraph threads API"
    default_auto_field = "django.db.models.BigAutoField"
