"""Volcano's ``pkg/scheduler/api`` in Python (snake_case names). Pure: no redis, no ray."""
from .cluster_info import ClusterInfo
from .helpers import (EVICTION_OCCURRED_ANNOTATION, GROUP_NAME_ANNOTATION, PIPELINED_NODE_ANNOTATION,
                      PIPELINED_STATUS_ANNOTATION, PREEMPTABLE_KEY, TASK_PRIORITY_ANNOTATION, TASK_SPEC_KEY,
                      allocated_status, completed_status, get_task_status, is_terminated, job_terminated,
                      merge_errors, pod_key, preemptable_status, scheduled_status)
from .job_info import DisruptionBudget, JobInfo, PodGroupPhase, copy_object, new_job_info
from .node_info import NodeInfo, new_node_info
from .queue_info import QueueInfo, QueueState, new_queue_info
from .resource import (INFINITY, MIN_RESOURCE, ZERO, DimensionDefaultValue, Resource, ResourceUnderflow,
                       empty_resource, exact_fields, exceeded_part, intersection, set_panic_on_error)
from .task_info import (TaskInfo, TransactionContext, get_job_id, get_pod_preemptable,
                        get_pod_resource_request, get_task_role, new_task_info)
from .types import (ALL_NODE_UNAVAILABLE_MSG, NODE_POD_NUMBER_EXCEEDED, NODE_RESOURCE_FIT_FAILED,
                    POD_REASON_SCHEDULABLE, POD_REASON_SCHEDULER_ERROR, POD_REASON_UNSCHEDULABLE, CacheError,
                    FatalCacheError, FitError, FitErrors, NodePhase, NodeState, Status, StatusCode, StatusSets,
                    TaskNodeError, TaskStatus, ValidateResult, wrap_insufficient_resource_reason)

__all__ = [
    "ClusterInfo", "JobInfo", "NodeInfo", "QueueInfo", "TaskInfo", "TransactionContext", "Resource",
    "TaskStatus", "NodePhase", "NodeState", "QueueState", "PodGroupPhase", "DisruptionBudget",
    "DimensionDefaultValue", "ZERO", "INFINITY", "MIN_RESOURCE", "ResourceUnderflow", "set_panic_on_error",
    "empty_resource", "exact_fields", "exceeded_part", "intersection",
    "allocated_status", "preemptable_status", "completed_status", "scheduled_status", "is_terminated",
    "get_task_status", "job_terminated", "merge_errors", "pod_key", "copy_object",
    "new_task_info", "new_job_info", "new_node_info", "new_queue_info",
    "get_pod_resource_request", "get_pod_preemptable", "get_job_id", "get_task_role",
    "Status", "StatusCode", "StatusSets", "ValidateResult", "FitError", "FitErrors",
    "CacheError", "TaskNodeError", "FatalCacheError", "wrap_insufficient_resource_reason",
    "POD_REASON_SCHEDULABLE", "POD_REASON_SCHEDULER_ERROR", "POD_REASON_UNSCHEDULABLE",
    "NODE_POD_NUMBER_EXCEEDED", "NODE_RESOURCE_FIT_FAILED", "ALL_NODE_UNAVAILABLE_MSG",
    "GROUP_NAME_ANNOTATION", "TASK_SPEC_KEY", "PREEMPTABLE_KEY", "TASK_PRIORITY_ANNOTATION",
    "PIPELINED_STATUS_ANNOTATION", "PIPELINED_NODE_ANNOTATION", "EVICTION_OCCURRED_ANNOTATION",
]
