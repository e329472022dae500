// Package v1alpha1 holds the partnerstream.io/v1alpha1 custom resource types.
// +kubebuilder:object:generate=true
// +groupName=partnerstream.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API group and version of the platform's resources.
	GroupVersion = schema.GroupVersion{Group: "partnerstream.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types with a runtime scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this group-version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Webhook{}, &WebhookList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
